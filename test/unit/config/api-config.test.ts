/** The API's settings: tokens and rate limit, as config/index.ts validates them. */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { apiConfig, ConfigError } from '../../../config/index.js'

const BASE = { VMPLANE_API_TOKEN: 'operator-token-0123456789', DATABASE_URL: 'postgres://localhost/vmplane' }

describe('apiConfig', () => {
  it('has no viewer token unless one is given, and an empty one counts as none', () => {
    assert.equal(apiConfig(BASE).tokens.viewer, null)
    assert.equal(apiConfig({ ...BASE, VMPLANE_API_VIEWER_TOKEN: '' }).tokens.viewer, null)
    assert.equal(apiConfig({ ...BASE, VMPLANE_API_VIEWER_TOKEN: 'viewer-token-0123456789' }).tokens.viewer, 'viewer-token-0123456789')
  })

  it('refuses a short token or a rate limit that is not a positive whole number, naming the variable', () => {
    assert.throws(() => apiConfig({ ...BASE, VMPLANE_API_VIEWER_TOKEN: 'short' }), (err: Error) =>
      err instanceof ConfigError && /VMPLANE_API_VIEWER_TOKEN: must be at least 16 characters/.test(err.message))
    assert.throws(() => apiConfig({ ...BASE, VMPLANE_API_RATE_LIMIT: '0' }), (err: Error) =>
      err instanceof ConfigError && /VMPLANE_API_RATE_LIMIT/.test(err.message))
  })

  it('limits each token to 6000 requests a minute unless told otherwise', () => {
    assert.equal(apiConfig(BASE).rateLimitPerMinute, 6000)
    assert.equal(apiConfig({ ...BASE, VMPLANE_API_RATE_LIMIT: '120' }).rateLimitPerMinute, 120)
  })
})
