/** `node dist/bundle/api.js` (this file bundled): serves the HTTP API until SIGINT or SIGTERM. */
import { apiConfig, loadConfigOrExit } from '../config/index.js'
import { buildServer } from '../api/server.js'
import { createLogger } from '../log/logger.js'

// What ps, top and process accounting show for this process, in place of `node`.
process.title = 'vmplane-api'
const config = loadConfigOrExit(apiConfig, 'api')
const logger = createLogger(config.log, 'api')
const server = await buildServer(config, logger)
await server.listen({ host: config.host, port: config.port })

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    logger.info({ signal }, 'stopping')
    server.close().then(() => process.exit(0), (err: unknown) => {
      logger.error({ err }, 'stop failed')
      process.exit(1)
    })
  })
}
