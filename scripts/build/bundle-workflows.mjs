/**
 * Bundles the workflow code once at build time, so workers start without running webpack and
 * replay tests load exactly the code that workers run. Plain JavaScript, run on the compiled
 * product (`npm run build`, and the Dockerfile after compiling tsconfig.build.json): the image's
 * build needs no compiled script of its own.
 */
import { writeFile } from 'node:fs/promises'
import { bundleWorkflowCode } from '@temporalio/worker'
import { WORKFLOWS_PATH, WORKFLOW_BUNDLE_PATH } from '../../dist/worker/workflow-bundle.js'

const { code } = await bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH })
await writeFile(WORKFLOW_BUNDLE_PATH, code)
console.log(`bundled workflows into ${WORKFLOW_BUNDLE_PATH} (${Math.round(code.length / 1024)} KiB)`)
