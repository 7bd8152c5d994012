/** `node dist/bin/worker.js`: runs the worker until SIGINT or SIGTERM. */
import { loadConfigOrExit, workerConfig } from '../config/index.js'
import { createLogger } from '../log/logger.js'
import { runWorker } from '../worker/index.js'

const config = loadConfigOrExit(workerConfig, 'worker')
const logger = createLogger(config.log, 'worker')
try {
  await runWorker(config, logger)
  logger.info('worker stopped')
} catch (err) {
  logger.fatal({ err }, 'worker failed')
  process.exit(1)
}
