/**
 * Identifiers that tie vmplane's parts together.
 *
 * Every operation workflow of an instance runs under one workflow ID, so Temporal runs at
 * most one of them at a time: that is the instance lock (I4).
 */

export function instanceWorkflowId (instanceId: string): string {
  return `instance-${instanceId}`
}

export function hostWorkflowId (hostId: string): string {
  return `host-${hostId}`
}

/** The IDs vmplane makes for instances, projects, networks and tokens (lower-case hex). */
export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/** Host IDs name directories and workflow IDs: keep them short and plain. */
export const HOST_ID_PATTERN = /^[a-z0-9][a-z0-9-]{0,62}$/
