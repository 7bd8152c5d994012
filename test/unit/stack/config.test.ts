/** The dev stack's choice of Temporal (VMPLANE_TEMPORAL), as stack/config.ts validates it. */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { ConfigError } from '../../../config/index.js'
import { stackConfig } from '../../../stack/config.js'

describe('stackConfig: VMPLANE_TEMPORAL', () => {
  it('runs the dev server unless told to run the cluster shape', () => {
    assert.equal(stackConfig({}).temporalShape, 'dev')
    assert.equal(stackConfig({ VMPLANE_TEMPORAL: 'cluster' }).temporalShape, 'cluster')
  })

  it('refuses any other shape, naming the variable', () => {
    assert.throws(() => stackConfig({ VMPLANE_TEMPORAL: 'cloud' }), (err: Error) =>
      err instanceof ConfigError && /VMPLANE_TEMPORAL:/.test(err.message))
  })

  it('refuses the cluster shape with a DATABASE_URL: its Temporal runs on the stack\'s own PostgreSQL', () => {
    const env = { VMPLANE_TEMPORAL: 'cluster', DATABASE_URL: 'postgres://localhost/vmplane' }
    assert.throws(() => stackConfig(env), (err: Error) =>
      err instanceof ConfigError && /VMPLANE_TEMPORAL: cluster runs Temporal on the stack's own PostgreSQL/.test(err.message))
    assert.equal(stackConfig({ ...env, VMPLANE_TEMPORAL: 'dev' }).databaseUrl, env.DATABASE_URL)
  })

  it('puts the cluster\'s other ports right after the frontend\'s unless told where', () => {
    assert.equal(stackConfig({ VMPLANE_TEMPORAL_PORT: '7233' }).temporalClusterPort, 7234)
    assert.equal(stackConfig({ VMPLANE_TEMPORAL_CLUSTER_PORT: '20000' }).temporalClusterPort, 20000)
  })
})
