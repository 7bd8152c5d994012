/**
 * `node dist/bundle/agent.js` (this file bundled): the host agent of one hypervisor host.
 * Settings come from the environment (`agentConfig` in config/index.ts). SIGTERM or SIGINT stops
 * the agent and leaves its VMMs running; the next agent on the same state directory adopts them.
 */
import { agentConfig, loadConfigOrExit } from '../config/index.js'
import { startAgent } from '../host-agent/agent.js'
import { StartupError } from '../host-agent/state-dir.js'
import { createLogger } from '../log/logger.js'

// What ps, top and process accounting show for this process, in place of `node`.
process.title = 'vmplane-agent'
const config = loadConfigOrExit(agentConfig, 'agent')
const log = createLogger(config.log, 'agent', { hostId: config.hostId })
let agent
try {
  agent = await startAgent(config, log)
} catch (err) {
  log.fatal({ err }, err instanceof StartupError ? err.message : 'host agent failed to start')
  log.flush()
  process.exit(1)
}

const running = agent
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    log.info({ signal }, 'host agent stopping; VMMs keep running')
    running.close().then(
      () => { process.exit(0) },
      (err: unknown) => {
        log.error({ err }, 'error while stopping')
        process.exit(1)
      }
    )
  })
}
