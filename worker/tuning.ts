/**
 * How a worker polls and caches, shared by vmplane's worker and the benchmark's floor worker
 * (scripts/bench/floor/), so that the floor is measured with exactly vmplane's settings.
 */
import type { WorkerOptions } from '@temporalio/worker'

export const WORKER_TUNING = {
  // A worker that dies holds its cached workflows' next tasks on its sticky queue until this
  // expires; short, so a stop in flight goes on at another worker within the stop's bound.
  stickyQueueScheduleToStartTimeout: '1 second'
} satisfies Partial<WorkerOptions>
