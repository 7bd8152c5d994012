import { builtinModules } from 'node:module'
import neostandard from 'neostandard'
import tseslint from 'typescript-eslint'

// Workflow code is replayed, so it must be deterministic: no Node built-ins and no I/O
// libraries (the Temporal samples' rule, extended to the libraries this project uses).
const nonDeterministicImports = [
  ...builtinModules.filter((m) => m !== 'assert').flatMap((m) => [m, `node:${m}`]),
  'pg',
  'fastify',
  'pino',
  'zod',
  '@temporalio/client',
  '@temporalio/worker',
  '@temporalio/activity'
]

export default [
  {
    ignores: ['dist/**', 'node_modules/**', '.tools/**', '.vmplane/**', 'test-output/**', 'host-agent/simulator/**']
  },
  ...neostandard({ ts: true }),
  {
    files: ['**/*.ts'],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname }
    },
    plugins: { '@typescript-eslint': tseslint.plugin },
    rules: {
      '@typescript-eslint/no-floating-promises': ['error', {
        // node:test runs what test() and describe() return by itself; awaiting them is optional.
        allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['test', 'it', 'describe', 'suite'] }]
      }]
    }
  },
  {
    // The contracts too: workflow code imports them (contract/, the floor's contract.ts).
    files: ['workflows/**/*.ts', 'contract/**/*.ts', 'bench/floor/workflows.ts', 'bench/floor/contract.ts', 'test/helpers/busy-worker/workflows.ts'],
    rules: {
      'no-restricted-imports': ['error', ...nonDeterministicImports]
    }
  }
]
