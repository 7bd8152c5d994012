/**
 * The event-file reader survives what a VMM it does not trust may write: events split across
 * reads, garbage between or glued to events, an unterminated flood; and it follows a live file.
 */
import assert from 'node:assert/strict'
import { appendFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { EventFileTail, EventStreamParser, eventFileSize, readEventFile, type VmmEvent } from '../../host-agent/cloud-hypervisor/event-monitor.js'
import { waitUntil } from '../../stack/wait.js'
import { tempDir } from './helpers/simulator.js'

function eventText (source: string, event: string, properties: Record<string, string> | null = null): string {
  return JSON.stringify({ timestamp: { secs: 1, nanos: 2 }, source, event, properties }, null, 2) + '\n\n'
}

const names = (events: VmmEvent[]): string[] => events.map((e) => `${e.source} ${e.event}`)

describe('EventStreamParser', () => {
  it('splits pretty-printed events on blank lines, across arbitrary chunk boundaries', () => {
    const text = eventText('vmm', 'starting') + eventText('vm', 'booting') + eventText('virtio-device', 'activated', { id: '__rng' })
    for (let cut = 1; cut < text.length; cut += 7) {
      const parser = new EventStreamParser()
      const events = [...parser.push(text.slice(0, cut)).events, ...parser.push(text.slice(cut)).events]
      assert.deepEqual(names(events), ['vmm starting', 'vm booting', 'virtio-device activated'], `cut at ${cut}`)
    }
  })

  it('reports garbage and recovers an event glued to it', () => {
    const parser = new EventStreamParser()
    const { events, garbage } = parser.push('\u0000 not json {{{\n\n' + 'junk' + eventText('vm', 'booted') + '{"truncated\n\n' + eventText('vm', 'shutdown'))
    assert.deepEqual(names(events), ['vm booted', 'vm shutdown'])
    assert.deepEqual(garbage, ['\u0000 not json {{{', 'junk', '{"truncated'])
  })

  it('ignores JSON that is not an event', () => {
    const { events, garbage } = new EventStreamParser().push('[1,2,3]\n\n{"source": 5}\n\n')
    assert.deepEqual(events, [])
    assert.equal(garbage.length, 2)
  })

  it('drops an unterminated tail that grows past its bound instead of keeping it forever', () => {
    const parser = new EventStreamParser()
    const { garbage } = parser.push('x'.repeat(70 * 1024))
    assert.equal(garbage.length, 1)
    assert.deepEqual(names(parser.push(eventText('vm', 'booted')).events), ['vm booted'])
  })
})

describe('event files', () => {
  let dir: { dir: string, remove: () => Promise<void> }
  before(async () => { dir = await tempDir('vmp-ev-') })
  after(async () => { await dir.remove() })

  it('readEventFile says whether the file ends with vmm shutdown', async () => {
    const path = join(dir.dir, 'clean')
    await writeFile(path, eventText('vmm', 'starting') + eventText('vm', 'shutdown') + eventText('vmm', 'shutdown'))
    assert.equal((await readEventFile(path)).endsWithVmmShutdown, true)
    await writeFile(path, eventText('vmm', 'starting') + eventText('vm', 'booted') + 'garbage at the end')
    assert.equal((await readEventFile(path)).endsWithVmmShutdown, false)
    assert.equal((await readEventFile(join(dir.dir, 'missing'))).endsWithVmmShutdown, false)
  })

  it('readEventFile and EventFileTail start at an offset taken with eventFileSize: the events written since', async () => {
    const path = join(dir.dir, 'offset')
    await writeFile(path, eventText('vmm', 'starting') + eventText('vm', 'migration-started') + eventText('vm', 'migration-failed'))
    const from = await eventFileSize(path)
    assert.equal(await eventFileSize(join(dir.dir, 'missing')), 0)
    await appendFile(path, eventText('vm', 'migration-started') + eventText('vm', 'migration-finished'))
    assert.deepEqual((await readEventFile(path, from)).events.map((e) => e.event), ['migration-started', 'migration-finished'])
    const tail = new EventFileTail(path)
    const seen: string[] = []
    tail.on('event', (e) => seen.push(e.event))
    await tail.start(from)
    try {
      await appendFile(path, eventText('vm', 'shutdown'))
      await waitUntil('the tail at the end', async () => seen.length === 3, { timeoutMs: 3000, intervalMs: 10 })
      assert.deepEqual(seen, ['migration-started', 'migration-finished', 'shutdown'])
    } finally {
      tail.stop()
    }
  })

  it('EventFileTail follows appends, from the start or from the end', async () => {
    const path = join(dir.dir, 'live')
    await writeFile(path, eventText('vmm', 'starting'))
    const fromStart = new EventFileTail(path)
    const fromEnd = new EventFileTail(path)
    const seen: Record<string, string[]> = { start: [], end: [] }
    const garbage: string[] = []
    fromStart.on('event', (e) => seen.start!.push(e.event))
    fromEnd.on('event', (e) => seen.end!.push(e.event))
    fromStart.on('garbage', (text) => garbage.push(text))
    await fromStart.start(0)
    await fromEnd.start('end')
    try {
      await appendFile(path, eventText('vm', 'booting'))
      await appendFile(path, 'not an event\n\n' + eventText('vm', 'booted').slice(0, 20))
      await appendFile(path, eventText('vm', 'booted').slice(20))
      await waitUntil('both tails at the end', async () => seen.start!.length === 3 && seen.end!.length === 2, { timeoutMs: 3000, intervalMs: 10 })
      await fromStart.catchUp()
      assert.deepEqual(seen.start, ['starting', 'booting', 'booted'])
      assert.deepEqual(seen.end, ['booting', 'booted'])
      assert.deepEqual(garbage, ['not an event'])
    } finally {
      fromStart.stop()
      fromEnd.stop()
    }
  })
})
