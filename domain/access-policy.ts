/**
 * Who may do what: the one policy table every `/v1` route is authorized against
 * (api/plugins/auth.ts; docs/design.md §18).
 *
 * A token is bound either to one project, with a project role, or to the fleet, with a fleet
 * role; the host agents' token has a role of its own. A route names one action. The decision:
 *
 * - a project's action (`project.*`) by a token of another project: `not-found`, the answer a
 *   project that does not exist gets, so no token learns what other projects hold;
 * - an action the token's role has: `allow`;
 * - otherwise `forbidden`: the token may see what it asked about, and may not do this to it.
 */

export const PROJECT_ROLES = ['viewer', 'collaborator', 'admin'] as const
export const FLEET_ROLES = ['fleet-viewer', 'fleet-operator'] as const
export type ProjectRole = typeof PROJECT_ROLES[number]
export type FleetRole = typeof FLEET_ROLES[number]
export type Role = ProjectRole | FleetRole | 'host'

export const ACTIONS = [
  /** Read a project and what it owns: instances, networks, operations, events, migrations, its quotas. */
  'project.read',
  /** Change what a project owns: create, start, stop, migrate, delete instances; networks; the console. */
  'project.write',
  /** Make, list and revoke a project's tokens. */
  'project.tokens',
  /** Read a project's audit trail. */
  'project.audit',
  /** List the projects the token may see. */
  'projects.list',
  /** Read the base images every host announces. */
  'images.read',
  /** Read the fleet: hosts, drains, the reconciler's passes, every project's audit trail. */
  'fleet.read',
  /** Run the fleet: hosts' cordons, drains and loss; projects and their quotas; fleet tokens; the reconciler. */
  'fleet.write',
  /** Renew a host's lease: the host agents' alone. */
  'lease.renew'
] as const
export type Action = typeof ACTIONS[number]

const VIEWER: readonly Action[] = ['project.read', 'projects.list', 'images.read']
const COLLABORATOR: readonly Action[] = [...VIEWER, 'project.write']

/** The policy table: every action each role has. */
export const POLICY: Readonly<Record<Role, readonly Action[]>> = {
  viewer: VIEWER,
  collaborator: COLLABORATOR,
  admin: [...COLLABORATOR, 'project.tokens', 'project.audit'],
  'fleet-viewer': [...VIEWER, 'project.audit', 'fleet.read'],
  'fleet-operator': ACTIONS.filter((action) => action !== 'lease.renew'),
  host: ['lease.renew']
}

/** Who a request is: its token's ID and name (never its secret), role, and project (null: the fleet's). */
export interface Principal {
  tokenId: string
  tokenName: string
  role: Role
  projectId: string | null
}

export type Decision = 'allow' | 'not-found' | 'forbidden'

/** The roles that have the action, as a refusal names them. */
export function rolesWith (action: Action): Role[] {
  return (Object.keys(POLICY) as Role[]).filter((role) => POLICY[role].includes(action))
}

export function isProjectAction (action: Action): boolean {
  return action.startsWith('project.')
}

/** The decision for the principal doing the action, on the project the request names (if any). */
export function decide (principal: Principal, action: Action, projectId: string | null): Decision {
  if (projectId !== null && principal.projectId !== null && principal.projectId !== projectId) return 'not-found'
  return POLICY[principal.role].includes(action) ? 'allow' : 'forbidden'
}
