/**
 * How a worker polls and caches, shared by vmplane's worker and the benchmark's floor worker
 * (bench/floor/), so that the floor is measured with exactly vmplane's settings.
 */
import type { Duration } from '@temporalio/common'
import type { WorkerOptions } from '@temporalio/worker'

/**
 * `isolateExecutionTimeout` is honoured by `Worker.create`, which lays the options it is given
 * over its defaults, but SDK 1.24 leaves it out of `WorkerOptions` ("not exposed at the moment").
 * test/faults/frozen-activation.test.ts fails if a later SDK stops honouring it.
 */
type WorkerTuning = Partial<WorkerOptions> & { isolateExecutionTimeout: Duration }

export const WORKER_TUNING = {
  // A worker that dies holds its cached workflows' next tasks on its sticky queue until this
  // expires; short, so a stop in flight goes on at another worker within the stop's bound.
  stickyQueueScheduleToStartTimeout: '1 second',
  // The watchdog on each workflow activation counts wall-clock time, frozen time included. When
  // it fires, the task fails; when it fires while the sandbox drains its microtasks, Node aborts
  // the whole process ("async hook stack has become corrupted", nodejs/node#38503). At the SDK's
  // default of 5 s, a worker paused that long mid-activation (SIGSTOP, a stalled VM, a starved
  // CPU) did one or the other on resume. Only a workflow stuck in a loop needs the watchdog, and
  // vmplane's activations take milliseconds: a long one costs only a slower catch of such a bug.
  // A longer pause still ends the process, which its supervisor restarts, losing nothing.
  isolateExecutionTimeout: '60 seconds'
} satisfies WorkerTuning
