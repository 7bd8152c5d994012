/**
 * The `--wait` progress line: rewritten in place on a terminal, a line per transition anywhere
 * else. (The CLI tests against a stack see only the second: their stderr is a pipe.)
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Progress } from '../../cli/progress.js'

/** Carriage return, then erase the line (ANSI). */
const REWRITE = '\r\x1b[2K'

function fakeStream (isTTY: boolean) {
  const writes: string[] = []
  return { writes, stream: { isTTY, write: (text: string) => writes.push(text) } as unknown as NodeJS.WriteStream }
}

describe('vmplane --wait progress', () => {
  it('on a terminal, rewrites one line with every state so far at each poll, and ends it at the end', () => {
    const { writes, stream } = fakeStream(true)
    const progress = new Progress('web-1', stream)
    for (const state of ['creating', 'creating', 'starting', 'running']) progress.observe(state)
    progress.end()
    assert.equal(writes.length, 5, 'a rewrite per poll, then the newline')
    assert.ok(writes.slice(0, 4).every((write) => write.startsWith(REWRITE)), 'each poll goes back to the start of the line and clears it')
    assert.match(writes[1].slice(REWRITE.length), /^web-1: creating \(\d+\.\d s\)$/)
    assert.match(writes[3].slice(REWRITE.length), /^web-1: creating → starting → running \(\d+\.\d s\)$/)
    assert.equal(writes[4], '\n')
  })

  it('elsewhere, writes a line per transition, naming where it came from', () => {
    const { writes, stream } = fakeStream(false)
    const progress = new Progress('web-1', stream)
    for (const state of ['running', 'running', 'stopping', 'stopping', 'stopped']) progress.observe(state)
    progress.end()
    assert.deepEqual(writes.map((line) => line.replace(/\(\d+\.\d s\)/, '(T)')), [
      'web-1: running (T)\n',
      'web-1: running → stopping (T)\n',
      'web-1: stopping → stopped (T)\n'
    ])
  })
})
