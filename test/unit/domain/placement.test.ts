/** Placement's choice (domain/placement.ts), from a table of hosts and sizes. */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { chooseHost, type HostRoom } from '../../../domain/placement.js'

const room = (id: string, freeVcpus: number, freeMemoryMiB: number): HostRoom => ({ id, freeVcpus, freeMemoryMiB })

describe('chooseHost', () => {
  const cases: Array<{ name: string, hosts: HostRoom[], vcpus: number, memoryMiB: number, chosen: string | null }> = [
    { name: 'no host may take it', hosts: [], vcpus: 1, memoryMiB: 256, chosen: null },
    { name: 'no host has room', hosts: [room('host-1', 1, 4096), room('host-2', 8, 128)], vcpus: 2, memoryMiB: 256, chosen: null },
    { name: 'exactly the room it needs is enough', hosts: [room('host-1', 2, 256)], vcpus: 2, memoryMiB: 256, chosen: 'host-1' },
    { name: 'the most free memory first', hosts: [room('host-1', 8, 1024), room('host-2', 2, 4096)], vcpus: 1, memoryMiB: 256, chosen: 'host-2' },
    { name: 'then the most free vCPUs', hosts: [room('host-1', 2, 4096), room('host-2', 6, 4096)], vcpus: 1, memoryMiB: 256, chosen: 'host-2' },
    { name: 'then the first by ID: the same facts give the same host', hosts: [room('host-1', 4, 4096), room('host-2', 4, 4096)], vcpus: 1, memoryMiB: 256, chosen: 'host-1' },
    { name: 'a roomier host without the vCPUs is passed over', hosts: [room('host-1', 1, 8192), room('host-2', 4, 1024)], vcpus: 2, memoryMiB: 512, chosen: 'host-2' }
  ]
  for (const c of cases) {
    it(c.name, () => {
      assert.equal(chooseHost(c.hosts, { vcpus: c.vcpus, memoryMiB: c.memoryMiB }), c.chosen)
    })
  }
})
