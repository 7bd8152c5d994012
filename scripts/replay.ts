/**
 * Replays one workflow history on this checkout's workflow bundle, as a worker would on restart,
 * and says whether it replays deterministically: the operator's check that a history from
 * production still runs on the code about to be deployed (docs/operations.md).
 *
 *   temporal workflow show -w instance-<id> -o json > history.json
 *   node dist/scripts/replay.js history.json
 *
 * Exits 0 if it replays, 1 with the error if not, 2 on bad usage. `temporal` cannot do this
 * itself: replaying runs the TypeScript workflow code, which only the SDK's worker can.
 */
import { readFile } from 'node:fs/promises'
import { basename } from 'node:path'
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker'
import { WORKFLOW_BUNDLE_PATH } from '../worker/workflow-bundle.js'

const file = process.argv[2]
if (file === undefined || process.argv.length > 3) {
  console.error('usage: node dist/scripts/replay.js <history.json from `temporal workflow show -o json`>')
  process.exit(2)
}

const history = JSON.parse(await readFile(file, 'utf8'))
const events: Array<{ eventType?: string, workflowExecutionStartedEventAttributes?: { workflowType?: { name?: string } } }> = history.events ?? []
const type = events[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name ?? 'unknown type'
// The replay worker's own log lines would bury the one line this prints.
Runtime.install({ logger: new DefaultLogger('ERROR') })
try {
  await Worker.runReplayHistory({ workflowBundle: { codePath: WORKFLOW_BUNDLE_PATH } }, history, basename(file))
  console.log(`${file}: ${type}, ${events.length} events: replays deterministically on this build`)
} catch (error) {
  console.log(`${file}: ${type}, ${events.length} events: does NOT replay on this build`)
  console.log(error instanceof Error ? `${error.name}: ${error.message}` : String(error))
  process.exitCode = 1
}
