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
