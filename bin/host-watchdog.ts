/**
 * `node dist/bundle/host-watchdog.js` (this file bundled): the host watchdog of the dev stack and
 * the tests (host-agent/watchdog/watchdog.ts), what `/dev/watchdog` is to a real host. It runs
 * beside the host's agent, which pets it through `VMPLANE_WATCHDOG_SOCKET` while it holds its
 * lease; SIGTERM or SIGINT ends it without firing.
 */
import { loadConfigOrExit, watchdogConfig } from '../config/index.js'
import { HostWatchdog } from '../host-agent/watchdog/watchdog.js'
import { createLogger } from '../log/logger.js'

process.title = 'vmplane-watchdog'
const config = loadConfigOrExit(watchdogConfig, 'host-watchdog')
const log = createLogger(config.log, 'host-watchdog', { hostId: config.hostId })
const watchdog = new HostWatchdog(config, log)
await watchdog.start()
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    log.info({ signal }, 'host watchdog stopping')
    watchdog.close().then(() => { process.exit(0) }, () => { process.exit(1) })
  })
}
