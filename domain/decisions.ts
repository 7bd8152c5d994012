/**
 * Decision keys: the name of every change an instance's execution records (docs/design.md,
 * "the write path").
 *
 * A change is keyed by what it decides, never by when the execution happened to make it: the
 * start of operation X, the end of VMM Y at generation G. The key becomes the ID of the change's
 * event, so a change recorded once is found again by every retry, every replay and every reset
 * of the execution that decides it again, and two different decisions can never share an ID.
 * The VMM a start places is named by the start's placement decision too.
 */

export const decisionKeys = {
  /** The operation began: its row is `running` and the instance shows what it is doing. */
  started: (operationId: string) => `operation/${operationId}/started`,
  /** The operation ended, whatever its outcome. */
  finished: (operationId: string) => `operation/${operationId}/finished`,
  /** The operation found no host with room, and waits for one. */
  waitingForCapacity: (operationId: string) => `operation/${operationId}/waiting-for-capacity`,
  /** The operation placed its new VMM on a host. */
  placed: (operationId: string) => `operation/${operationId}/placed`,
  /** A reboot whose VM did not come back turned to replacing the VMM. */
  replacing: (operationId: string) => `operation/${operationId}/replacing`,
  /** A migration took a step (target-ready, sending, committed, source-gone, cancelling). */
  migrationStep: (operationId: string, step: string) => `operation/${operationId}/migration/${step}`,
  /** The halt that began with this stop or delete brought the instance to rest. */
  halted: (operationId: string) => `operation/${operationId}/halted`,
  /** The instance took in the end of its VMM when no operation did. */
  vmmEnded: (vmmId: string) => `vmm/${vmmId}/ended`,
  /** The instance took in its VMM running (at this generation) when no operation did. */
  vmmRunning: (vmmId: string, generation: number) => `vmm/${vmmId}/running/${generation}`,
  /** The VMM's API stopped or started answering at this generation. */
  responsiveness: (vmmId: string, generation: number) => `vmm/${vmmId}/responsiveness/${generation}`
} as const
