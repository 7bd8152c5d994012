import assert from 'node:assert/strict'
import { test } from 'node:test'
import { restartDelay } from '../../stack/supervisor.js'

test('a component that keeps failing waits 250 ms, then twice as long each time, at most the longest wait', () => {
  const delays: number[] = []
  let previous: number | null = null
  for (let i = 0; i < 8; i++) {
    previous = restartDelay(previous, 500, 10_000)
    delays.push(previous)
  }
  assert.deepEqual(delays, [250, 500, 1000, 2000, 4000, 8000, 10_000, 10_000])
})

test('a component that stayed up for 30 s starts over at 250 ms', () => {
  assert.equal(restartDelay(10_000, 30_000, 10_000), 250)
  assert.equal(restartDelay(10_000, 29_999, 10_000), 10_000)
})

test('a component whose longest wait is 250 ms (the fault tests\' stacks) restarts after 250 ms every time', () => {
  let previous: number | null = null
  for (let i = 0; i < 4; i++) {
    previous = restartDelay(previous, 500, 250)
    assert.equal(previous, 250)
  }
})
