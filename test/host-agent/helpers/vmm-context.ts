/**
 * What the agent's supervisors need, for tests that run them in the test's own process on a
 * state directory of their own: the simulator as the VMM program, no network namespace (no TAPs
 * are asked for), short intervals, and callbacks that do nothing.
 */
import { join } from 'node:path'
import { pino } from 'pino'
import { ImageResolver } from '../../../host-agent/images.js'
import { TapDevices } from '../../../host-agent/network/taps.js'
import { HostFirewall } from '../../../host-agent/network/host-firewall.js'
import { NetworkSegments } from '../../../host-agent/network/segments.js'
import { InstanceStorage } from '../../../host-agent/storage/instance-storage.js'
import type { RecordStore } from '../../../host-agent/store/record-store.js'
import { MigrationTransport } from '../../../host-agent/supervisor/migration-transport.js'
import { VmmDevices } from '../../../host-agent/supervisor/vmm-devices.js'
import type { VmmContext } from '../../../host-agent/supervisor/vmm-supervisor.js'
import { SIMULATOR_BINARY } from './simulator.js'

export function testVmmContext (dir: string, store: RecordStore): VmmContext {
  const images = new ImageResolver(dir)
  return {
    settings: {
      hostId: 'host-test',
      cloudHypervisor: SIMULATOR_BINARY,
      vmmCallTimeoutMs: 1000,
      vmmPingIntervalMs: 1000,
      powerButtonIntervalMs: 1000,
      processPollMs: 1000,
      apiReadyTimeoutMs: 1000,
      killWaitMs: 1000,
      commandPrefix: [],
      serialLogBytes: 1024
    },
    store,
    devices: new VmmDevices(images, new InstanceStorage(join(dir, 'storage'), 'host-test', images), new TapDevices(null), new NetworkSegments(null, 'eth0'), new HostFirewall(null, async () => ({ segments: [], guests: [] }))),
    transport: new MigrationTransport({ kind: 'unix', dir: join(dir, 'migrations') }),
    log: pino({ level: 'silent' }),
    onChange: () => {},
    onKill: () => {},
    onMigrationEnded: () => {},
    refusesNewVmms: () => null
  }
}
