/**
 * The test harness's port picker (test/helpers/launcher.ts `freePorts`), its random draw steered.
 */
import assert from 'node:assert/strict'
import { afterEach, describe, it, mock } from 'node:test'
import { freePorts, PICKABLE } from '../../helpers/launcher.js'

/** The `Math.random()` value that makes the picker's try for one port land on `port`. */
function randomFor (port: number): number {
  return (port - PICKABLE.min + 0.5) / (PICKABLE.max - PICKABLE.min + 1)
}

const random = Math.random

describe('freePorts', () => {
  afterEach(() => mock.restoreAll())

  // Chromium refuses to load a page from 10080 (net::ERR_UNSAFE_PORT): a Temporal UI given it
  // could not be opened by the UI test's browser.
  it('never hands out a port a browser refuses to load pages from', async () => {
    const draws = [randomFor(10_080), randomFor(10_080), randomFor(20_001)]
    mock.method(Math, 'random', () => draws.shift() ?? random())
    assert.notEqual(await freePorts(1), 10_080)
  })
})
