/**
 * Two stacks with their own data directories and ports run on one machine at once, sharing
 * nothing.
 */
import assert from 'node:assert/strict'
import { after, test } from 'node:test'
import { api, startStack, type TestStack } from '../helpers/stack.js'

const stacks: TestStack[] = []
after(async () => {
  await Promise.all(stacks.map((stack) => stack.stop()))
})

test('two stacks run side by side', { timeout: 600_000 }, async () => {
  const started = await Promise.allSettled([startStack({ hosts: 1 }), startStack({ hosts: 1 })])
  for (const result of started) if (result.status === 'fulfilled') stacks.push(result.value)
  for (const result of started) if (result.status === 'rejected') throw result.reason
  const [one, two] = stacks
  assert.notEqual(one.info.apiUrl, two.info.apiUrl)
  assert.notEqual(one.info.temporalAddress, two.info.temporalAddress)
  assert.notEqual(one.info.apiToken, two.info.apiToken)
  for (const stack of stacks) assert.equal((await api(stack).get('/v1/instances')).status, 200)
  // Each stack's token is its own.
  assert.equal((await api({ apiUrl: one.info.apiUrl, apiToken: two.info.apiToken }).get('/v1/instances')).status, 401)
})
