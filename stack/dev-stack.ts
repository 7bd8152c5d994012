/**
 * `node dist/stack/dev-stack.js` (what `npm start` runs once the project is built): the whole of
 * vmplane on this machine, in the foreground. Settings come from the environment
 * (`stackConfig` in stack/config.ts); stack/stack.ts says what happens.
 *
 * Ctrl-C or SIGTERM stops everything in order and exits 0; a second Ctrl-C kills every
 * component at once. A repeated SIGTERM only asks again for the stop already under way: a
 * supervisor that signals the whole process group may deliver it twice.
 */
import { ConfigError } from '../config/index.js'
import { stackConfig } from './config.js'
import { DevStack } from './stack.js'

let stack: DevStack
try {
  stack = new DevStack(stackConfig())
} catch (error) {
  if (!(error instanceof ConfigError)) throw error
  console.error(`dev-stack: ${error.message}`)
  process.exit(2)
}

let stopping = false

function exitAfter (work: Promise<void>, code: number): void {
  work.then(() => process.exit(code), (error: unknown) => {
    console.error('dev-stack: stopping failed:', error)
    process.exit(1)
  })
}

function stopAndExit (code: number): void {
  if (stopping) return
  stopping = true
  exitAfter(stack.stop(), code)
}

process.on('SIGTERM', () => stopAndExit(0))
process.on('SIGHUP', () => stopAndExit(0))
process.on('SIGINT', () => {
  if (stopping) exitAfter(stack.kill(), 130)
  else stopAndExit(0)
})

try {
  await stack.start()
  // From here the supervised children keep this process alive until a signal stops it.
} catch (error) {
  // A stop during the start aborts it; that is not a failure.
  if (!stopping) {
    stack.log(`start failed: ${error instanceof Error ? error.message : String(error)}`)
    stopAndExit(1)
  }
}
