/** The agent's migration transport and lease settings, as config/index.ts validates them. */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { agentConfig, ConfigError } from '../../../config/index.js'

const BASE = {
  VMPLANE_HOST_ID: 'host-1',
  VMPLANE_AGENT_TOKEN: 'agent-token-0123456789',
  VMPLANE_AGENT_STATE_DIR: '/var/lib/vmplane/state',
  VMPLANE_IMAGE_DIR: '/var/lib/vmplane/images',
  VMPLANE_STORAGE_DIR: '/srv/vmplane'
}

describe('agentConfig: VMPLANE_MIGRATION_LISTEN', () => {
  it('defaults to a directory of Unix sockets in the shared storage', () => {
    assert.deepEqual(agentConfig(BASE).migrationListen, { kind: 'unix', dir: '/srv/vmplane/migrations' })
  })

  it('takes a directory, or an address and a port range', () => {
    assert.deepEqual(agentConfig({ ...BASE, VMPLANE_MIGRATION_LISTEN: 'unix:/run/vmplane/migrations/' }).migrationListen,
      { kind: 'unix', dir: '/run/vmplane/migrations' })
    assert.deepEqual(agentConfig({ ...BASE, VMPLANE_MIGRATION_LISTEN: 'tcp:10.1.2.3:49152-49215' }).migrationListen,
      { kind: 'tcp', address: '10.1.2.3', firstPort: 49152, lastPort: 49215 })
    assert.deepEqual(agentConfig({ ...BASE, VMPLANE_MIGRATION_LISTEN: 'tcp:[fd00::5]:6000-6000' }).migrationListen,
      { kind: 'tcp', address: '[fd00::5]', firstPort: 6000, lastPort: 6000 })
  })

  it('refuses a relative directory, a host name, a reversed or out-of-range port range, naming the variable', () => {
    for (const value of ['unix:migrations', 'tcp:host-2:6000-6010', 'tcp:10.0.0.1:6010-6000', 'tcp:10.0.0.1:0-10', 'tcp:10.0.0.1:6000', 'tcp:fd00::5:6000-6001', 'http://x']) {
      assert.throws(() => agentConfig({ ...BASE, VMPLANE_MIGRATION_LISTEN: value }), (err: Error) =>
        err instanceof ConfigError && /VMPLANE_MIGRATION_LISTEN: must be unix:<absolute directory> or tcp:/.test(err.message), value)
    }
  })
})

describe('agentConfig: the lease (VMPLANE_AGENT_WATCHDOG, VMPLANE_API_URL)', () => {
  it('keeps no lease without a watchdog', () => {
    assert.deepEqual([agentConfig(BASE).watchdog, agentConfig(BASE).apiUrl], [null, null])
  })

  it('keeps one with a watchdog, renewed from the API', () => {
    const config = agentConfig({ ...BASE, VMPLANE_AGENT_WATCHDOG: '/dev/watchdog', VMPLANE_API_URL: 'http://10.0.0.1:8080' })
    assert.deepEqual([config.watchdog, config.apiUrl], [{ target: '/dev/watchdog', timeoutMs: 5_000 }, 'http://10.0.0.1:8080'])
  })

  it('refuses a watchdog without the API to renew the lease from, naming the variable', () => {
    assert.throws(() => agentConfig({ ...BASE, VMPLANE_AGENT_WATCHDOG: '/dev/watchdog' }), (err: Error) =>
      err instanceof ConfigError && /VMPLANE_API_URL: is required with VMPLANE_AGENT_WATCHDOG/.test(err.message))
  })
})
