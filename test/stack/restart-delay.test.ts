import assert from 'node:assert/strict'
import { test } from 'node:test'
import { restartDelay } from '../../scripts/dev-stack/supervisor.js'

test('a component that keeps failing waits 1 s, then twice as long each time, at most 10 s', () => {
  const delays: number[] = []
  let previous: number | null = null
  for (let i = 0; i < 6; i++) {
    previous = restartDelay(previous, 500)
    delays.push(previous)
  }
  assert.deepEqual(delays, [1000, 2000, 4000, 8000, 10_000, 10_000])
})

test('a component that stayed up for 30 s starts over at 1 s', () => {
  assert.equal(restartDelay(10_000, 30_000), 1000)
  assert.equal(restartDelay(10_000, 29_999), 10_000)
})
