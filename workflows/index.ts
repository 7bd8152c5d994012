/** Every workflow the worker registers. */
export {
  applyVmmReports,
  createInstance,
  deleteInstance,
  migrateInstance,
  rebootInstance,
  startInstance,
  stopInstance
} from './instance-workflows.js'
export { drainHost } from './drain-host.js'
export { monitorHost } from './monitor-host.js'
export { applyFirewall } from './apply-firewall.js'
export { reconcile } from './reconcile.js'
