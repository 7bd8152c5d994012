/**
 * The fast layer's Temporal: a dev server of its own (TestWorkflowEnvironment on the built CLI,
 * with vmplane's search attributes) and a worker running the built workflow bundle, its
 * activities played by a `WorkflowWorld`, or by other doubles (`startWorkerEnvironment`). Call
 * `stop()` in an `after` hook.
 */
import assert from 'node:assert/strict'
import type { Client } from '@temporalio/client'
import { TestWorkflowEnvironment } from '@temporalio/testing'
import { Worker } from '@temporalio/worker'
import { heartbeatWhileRunning } from '../../worker/activity-heartbeats.js'
import { WORKFLOW_BUNDLE_PATH } from '../../worker/workflow-bundle.js'
import { SEARCH_ATTRIBUTE_KEYS } from '../../contract/search-attributes.js'
import { WorkflowWorld } from './workflow-world.js'

export interface WorkerEnvironment {
  client: Client
  stop: () => Promise<void>
}

export interface WorkflowEnvironment extends WorkerEnvironment {
  world: WorkflowWorld
}

/** A dev server of the test's own on the built CLI, with vmplane's search attributes, and `extraArgs` for it. */
export async function startLocalTemporal (extraArgs: string[] = []): Promise<TestWorkflowEnvironment> {
  const temporal = process.env.TEMPORAL_CLI
  assert.ok(temporal, 'TEMPORAL_CLI names the Temporal CLI (npm test sets it)')
  return await TestWorkflowEnvironment.createLocal({
    server: { executable: { type: 'existing-path', path: temporal }, searchAttributes: SEARCH_ATTRIBUTE_KEYS, extraArgs }
  })
}

/** `serverArgs`: flags for the test's dev server (its dynamic config, say). */
export async function startWorkflowEnvironment (taskQueue: string, serverArgs: string[] = []): Promise<WorkflowEnvironment> {
  const world = new WorkflowWorld()
  return { ...(await startWorkerEnvironment(taskQueue, world.activities(), serverArgs)), world }
}

/**
 * A dev server of the test's own (with `serverArgs`) and a worker running the built workflow
 * bundle whose activities are `activities`: doubles of the test's choosing.
 */
export async function startWorkerEnvironment (taskQueue: string, activities: object, serverArgs: string[] = []): Promise<WorkerEnvironment> {
  const env = await startLocalTemporal(serverArgs)
  const worker = await Worker.create({
    connection: env.nativeConnection,
    taskQueue,
    workflowBundle: { codePath: WORKFLOW_BUNDLE_PATH },
    // As the real worker: its activities heartbeat, so a stub that takes its time is not timed out.
    interceptors: { activity: [heartbeatWhileRunning] },
    activities
  })
  const running = worker.run()
  return {
    client: env.client,
    async stop () {
      worker.shutdown()
      await running
      await env.teardown()
    }
  }
}
