/** The dev stack's replicas: how many of each, and the names and ports each gets. */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { ConfigError } from '../../../config/index.js'
import { stackConfig } from '../../../stack/config.js'
import { planApiReplicas, planWorkerReplicas } from '../../../stack/components.js'

const PORTS = { VMPLANE_API_PORT: '18080', VMPLANE_WORKER_METRICS_PORT: '19464' }

describe('the dev stack\'s replicas', () => {
  it('runs one API on the API port and one worker unless told otherwise', () => {
    const config = stackConfig(PORTS)
    assert.deepEqual([config.apiReplicas, config.workerReplicas], [1, 1])
    assert.deepEqual(planApiReplicas(config), [{ component: 'api', port: 18080, url: 'http://127.0.0.1:18080' }])
    assert.deepEqual(planWorkerReplicas(config), [{ component: 'worker', port: 19464, url: 'http://127.0.0.1:19464/metrics' }])
  })

  it('runs two of each on the cluster shape unless told otherwise', () => {
    assert.deepEqual([stackConfig({ ...PORTS, VMPLANE_TEMPORAL: 'cluster' }).apiReplicas, stackConfig({ ...PORTS, VMPLANE_TEMPORAL: 'cluster' }).workerReplicas], [2, 2])
    const told = stackConfig({ ...PORTS, VMPLANE_TEMPORAL: 'cluster', VMPLANE_API_REPLICAS: '1', VMPLANE_WORKER_REPLICAS: '3' })
    assert.deepEqual([told.apiReplicas, told.workerReplicas], [1, 3])
  })

  it('puts several APIs on the ports after the API port, which HAProxy takes, and numbers the others from 2', () => {
    const config = stackConfig({ ...PORTS, VMPLANE_API_REPLICAS: '2', VMPLANE_WORKER_REPLICAS: '3' })
    assert.deepEqual(planApiReplicas(config).map(({ component, port }) => [component, port]), [['api', 18081], ['api-2', 18082]])
    assert.deepEqual(planWorkerReplicas(config).map(({ component, port }) => [component, port]), [['worker', 19464], ['worker-2', 19465], ['worker-3', 19466]])
  })

  it('refuses a count that is not a whole number from 1 to 8, naming the variable', () => {
    for (const [name, value] of [['VMPLANE_API_REPLICAS', '0'], ['VMPLANE_WORKER_REPLICAS', '9'], ['VMPLANE_API_REPLICAS', 'two']]) {
      assert.throws(() => stackConfig({ [name!]: value }), (err: Error) => err instanceof ConfigError && err.message.includes(name!))
    }
  })
})
