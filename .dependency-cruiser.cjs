/**
 * The layers of vmplane and the imports between them (docs/design.md §2), checked by
 * `npm run lint` (`depcruise`): no import cycle anywhere, and no import from a lower layer to a
 * higher one. From the bottom:
 *
 * - `domain/`: states, rules, requests, errors; imports nothing of ours but itself.
 * - `contract/`: what workflows, activities, the API and the agents share (workflow types, signals,
 *   queries, search attributes, the activities' interface and wire types); imports only `domain/`.
 *   Workflow code imports it, so it stays deterministic (eslint.config.js).
 * - `http/` (the host agent's client, what both servers share), `config/`, `log/`, `faults/`:
 *   import only `domain/` and each other.
 * - `db/`: PostgreSQL; imports `domain/`, `contract/`, `config/`, `log/`.
 * - `activities/`, `workflows/`, `api/`, `host-agent/`: each depends on `contract/` and the layers
 *   under it, never on another of the four: the workflows reach the activities only through the
 *   contract's `Activities` interface, the API and the agents start and signal workflows only
 *   through the contract.
 * - the product (everything but `test/`, `scripts/`, `bench/`) never imports the harness; the dev
 *   stack (`stack/`) only the tools it builds and finds (`scripts/tools/`).
 */
const OURS = '^(domain|contract|db|config|log|faults|http|activities|workflows|api|host-agent|cli|bin|worker|stack|scripts|bench|test)/'

/** A rule that `from` may import nothing of ours but what `allowed` matches. */
function onlyImports (name, comment, from, allowed) {
  return { name, comment, severity: 'error', from: { path: from }, to: { path: OURS, pathNot: allowed } }
}

/** A rule that `from` may not import what `forbidden` matches. */
function neverImports (name, comment, from, forbidden) {
  return { name, comment, severity: 'error', from: { path: from }, to: { path: forbidden } }
}

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'An import cycle: each module of it needs the others to be understood, tested or moved.',
      severity: 'error',
      from: {},
      to: { circular: true }
    },
    onlyImports('domain-is-the-bottom', 'domain/ imports nothing of ours but domain/.', '^domain/', '^domain/'),
    onlyImports('contract-on-domain', 'contract/ imports only domain/ (and itself): workflow code imports it.', '^contract/', '^(contract|domain)/'),
    onlyImports('shared-below-the-processes', 'http/, config/, log/ and faults/ (what the processes share) import only domain/ and each other.', '^(http|config|log|faults)/', '^(http|config|log|faults|domain)/'),
    onlyImports('db-below-activities', 'db/ imports only domain/, contract/, config/ and log/.', '^db/', '^(db|domain|contract|config|log)/'),
    onlyImports('workflows-on-contract', 'workflows/ import only contract/ and domain/: they reach activities through the contract.', '^workflows/', '^(workflows|contract|domain)/'),
    neverImports('activities-below-workflows', 'activities/ never import workflows/, api/, host-agent/, cli/ or bin/: the contract holds what they share.', '^activities/', '^(workflows|api|host-agent|cli|bin)/'),
    neverImports('api-on-contract', 'api/ never imports workflows/, activities/ or host-agent/: it starts and signals workflows through contract/.', '^api/', '^(workflows|activities|host-agent)/'),
    neverImports('host-agent-on-contract', 'host-agent/ never imports api/, workflows/, activities/ or db/: it signals workflows through contract/.', '^host-agent/', '^(api|workflows|activities|db)/'),
    {
      name: 'product-apart-from-harness',
      comment: 'The product never imports the test harness, the scripts or the benchmarks.',
      severity: 'error',
      from: { path: '^(?!test/|scripts/|bench/|stack/)' },
      to: { path: '^(test|scripts|bench)/' }
    },
    {
      name: 'dev-stack-apart-from-harness',
      comment: 'The dev stack never imports the test harness or the benchmarks; of the scripts, only the tools it builds and finds (scripts/tools/: the Temporal CLI, HAProxy).',
      severity: 'error',
      from: { path: '^stack/' },
      to: { path: '^(test|scripts|bench)/', pathNot: '^scripts/tools/' }
    }
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(node_modules|dist|\\.tools|host-agent/simulator)/' },
    // Type-only imports count: a cycle of types is a cycle of understanding all the same.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.js', '.mjs', '.cjs', '.json']
    }
  }
}
