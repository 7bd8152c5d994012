/**
 * Fault injection for tests, off unless `VMPLANE_FAULT_INJECTION=1`: the agent then reads the
 * file `<stateDir>/fault` on every API request (but `/healthz`) and, if it says `503`, answers
 * 503; if it says `hang`, never answers. With the setting off the hook is not even installed, so a
 * production agent cannot be made to misbehave by a file.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { onRequestAsyncHookHandler } from 'fastify'

function currentFault (file: string): string | null {
  try {
    return readFileSync(file, 'utf8').trim()
  } catch {
    return null
  }
}

export function injectFaults (stateDir: string): onRequestAsyncHookHandler {
  const file = join(stateDir, 'fault')
  return async (request, reply) => {
    if (request.url === '/healthz') return
    const fault = currentFault(file)
    if (fault === '503') {
      await reply.code(503).send({ error: 'Service Unavailable', message: 'fault injected: 503' })
    } else if (fault === 'hang') {
      await new Promise(() => {})
    }
  }
}
