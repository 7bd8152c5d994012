/**
 * Where the workflow code is and where its bundle goes. The bundle is built once by
 * `npm run build`; workers and replay tests load exactly that file.
 */
import { fileURLToPath } from 'node:url'

export const WORKFLOWS_PATH = fileURLToPath(new URL('../workflows/index.js', import.meta.url))
export const WORKFLOW_BUNDLE_PATH = fileURLToPath(new URL('../workflow-bundle.js', import.meta.url))
