/**
 * The `patched()` markers of shipped workflows, each named for the change it guards: code behind a
 * marker runs in executions that began after the change, and executions recorded before it replay
 * as they ran (docs/design.md §12; the replay tests hold recorded histories of both).
 */

/**
 * Instances gained disks, seeds and interfaces (issue 16): a delete removes its instance's
 * storage before recording its end, and a reconcile pass reads the storage and releases leaked
 * addresses.
 */
export const INSTANCE_STORAGE_PATCH = 'instance-storage'

/**
 * Instances belong to projects (issue 28): an execution shows its instance's project in the
 * `Project` search attribute, set from the record it reads when its starter did not set it (a
 * host's report, a restart).
 */
export const PROJECT_IN_SEARCH_PATCH = 'project-in-search'

/**
 * A stop or delete can reach an instance its delete has just destroyed (accepted as that delete
 * ended): it ends its operation saying so, and records no change of state, where it recorded the
 * instance `stopped` or `destroyed` again.
 */
export const HALT_OF_DESTROYED_PATCH = 'halt-of-destroyed'

/**
 * A VMM PostgreSQL records gone is gone in an execution's memory too, whatever its generation: a
 * host declared lost fences its VMMs without a generation, and an execution holding a newer answer
 * of the lost host's agent kept them live, so a stop waited on them for ever (issue 25).
 */
export const RECORDED_END_IS_FINAL_PATCH = 'recorded-end-is-final'

/**
 * A reconcile pass tells again every instance whose active VMM was fenced with a lost host while
 * its record still reads it live: the fan-out of a host's loss may not have reached it (issue 25).
 */
export const HOST_LOSS_CATCH_UP_PATCH = 'host-loss-catch-up'

/**
 * A drain ends `drained` only once every migration it asked for has its outcome, where it ended
 * as soon as nothing was left on its host: a migration whose source was recorded gone before its
 * operation's success was never counted migrated.
 */
export const DRAIN_AWAITS_OUTCOMES_PATCH = 'drain-awaits-outcomes'

/**
 * A drain that took a stop never continues as new: it did when Temporal suggested it in the round
 * the stop arrived in, and the next run, never told, drained on.
 */
export const DRAIN_KEEPS_STOP_PATCH = 'drain-keeps-stop'

/**
 * A migrate execution that finds its migration recorded (reset, retried, continued as new) resumes
 * from the record: the source it recorded, not the instance's active VMM, which after the commit
 * is the target, and which it killed as the source (issue 25).
 */
export const MIGRATE_RESUMES_FROM_RECORD_PATCH = 'migrate-resumes-from-record'

/**
 * The guest runs in one place (issue 25): a migration's send and cancel calls no longer hold up
 * the reading of both sides (a commit, a cancel or a timeout while a host is away), a source is
 * killed once its target has the VM instead of 10 s later, and a source its agent holds paused is
 * resumed when the target does not have the VM.
 */
export const ONE_GUEST_ONE_PLACE_PATCH = 'one-guest-one-place'

/**
 * An agent's refusal to describe a VMM is no news: the operation goes on as if it had not asked,
 * where the refusal escaped the operation and failed the whole execution (issue 25).
 */
export const REFUSED_DESCRIBE_IS_NO_NEWS_PATCH = 'refused-describe-is-no-news'

/**
 * An activity's failure that escapes an operation ends that operation (`Interrupted`; a migration
 * is left for the reconciler to carry on), never the whole execution, which then settled nothing
 * and left the instance as it was, a migration for good (issue 25).
 */
export const OPERATION_OUTLIVES_FAILURE_PATCH = 'operation-outlives-failure'

/**
 * A halt continues as new once the history is long, carrying every halt it holds: one that waited
 * on an unreachable host for days, or took in a flood of requests, reached Temporal's limits
 * (issue 25).
 */
export const HALTS_CONTINUE_AS_NEW_PATCH = 'halts-continue-as-new'

/**
 * Each series of attempts of a call is twice as long as the one before, from 2 minutes up to 6
 * hours, where every series took 2 minutes and a wait on an unreachable host grew the history
 * to Temporal's limit in 9 days (issue 25).
 */
export const GROWING_SERIES_PATCH = 'growing-series'

/**
 * A series of attempts that runs out of time ends with its last attempt's failure and the retry
 * state TIMEOUT, not always a timeout failure: it is followed by a new series too, where it
 * escaped and failed the execution (a stop waiting on an unreachable host, after 2 minutes).
 */
export const SERIES_OUT_OF_TIME_PATCH = 'series-out-of-time'

/**
 * A host's monitor takes every heartbeat it has not recorded, where it compared with the last one
 * heard when it began to wait: the heartbeat that started the monitor (the agent's
 * signalWithStart), or one heard while the last was being recorded, was skipped until the next,
 * and a host heard once could be marked unreachable (issue 26).
 */
export const HEARTBEATS_NOT_SKIPPED_PATCH = 'heartbeats-not-skipped'

/**
 * A boot with no VMM to fence first asks the agent to make the VMM from its placement's activity,
 * once the placement has committed, and skips `ensureVmm` when the agent answered (issue 26: one
 * activity and one workflow task fewer for a create).
 */
export const PLACE_AND_BOOT_PATCH = 'place-and-boot'

/**
 * Reports of a VMM taken in before the execution knew the VMM are applied once it does: with
 * `place-and-boot`, a VMM's agent can report it running before its placement's answer arrives,
 * and the boot then waited for its deadline (issue 26).
 */
export const EARLY_REPORTS_PATCH = 'early-reports'

/**
 * A host's monitor judges the lease of a host that keeps one (its agent renews it from the API)
 * once its bound could have passed, and again when each judgement says, declaring the host lost
 * when the rule allows (issue 27, docs/design.md §17). Its wait for a heartbeat ends at whichever
 * comes first, the unreachable threshold or the judgement, each counted from when it was set.
 */
export const HOST_LEASES_PATCH = 'host-leases'
