/**
 * `Idempotency-Key` on every mutating request (I3).
 *
 * With a key, every ID a request creates (the instance's, the operation's) is derived from the
 * key, so a client that retries after losing an answer — or after this API crashed mid-request —
 * finds what the first attempt made instead of making a second one. The first answer is kept for
 * a day: the same key with the same request gets it again (`Idempotency-Replayed: true`); the same
 * key with another request is refused with 422. Without a key, IDs are random.
 *
 * A key is claimed before its request does anything. The same key sent again while the first
 * request is still in progress is refused with 409 and `Retry-After` (the IETF draft's answer),
 * whatever its body: two requests never run at once under one key. A failure of ours (5xx) gives
 * the claim back, so a retry runs afresh; a claim left by an API process that died is taken over
 * once it is older than the longest a request can be held (`?wait=`).
 */
import { createHash, randomUUID } from 'node:crypto'
import type { FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { v5 as uuidv5 } from 'uuid'
import { LIMITS } from '../../domain/limits.js'
import { ApiProblem } from './problem-details.js'

/** The namespace of IDs derived from idempotency keys (a fixed, random UUID). */
const KEY_NAMESPACE = '6f2a8b4e-3d1c-4e7a-9b5f-0c8d2e1a7f34'
const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/
/** Longer than any request can take, `?wait=` included: a claim this old was abandoned. */
const ABANDONED_CLAIM_SECONDS = LIMITS.waitSeconds.max + 60

declare module 'fastify' {
  interface FastifyRequest {
    /** An ID for what this request creates (`purpose` tells them apart): derived from its key, if any. */
    newId: (purpose: string) => string
    idempotency: { key: string, hash: string } | null
  }
}

/**
 * What the request asks for: its method, URL and body. `?wait=` only says how long to hold the
 * answer, so a retry that waits longer or not at all is still the same request.
 */
function requestHash (request: FastifyRequest): string {
  const url = new URL(request.url, 'http://api')
  url.searchParams.delete('wait')
  return createHash('sha256').update(JSON.stringify([request.method, url.pathname + url.search, request.body ?? null])).digest('hex')
}

/** Who the key belongs to; only the operator token may change anything, so one principal. */
const PRINCIPAL = 'api'

export default fp(async (fastify) => {
  fastify.decorateRequest('idempotency', null)
  fastify.decorateRequest('newId', () => { throw new Error('newId is set by the onRequest hook') })
  // A function of its own per request, so handlers can pass it on unbound.
  fastify.addHook('onRequest', async (request) => {
    request.newId = (purpose: string) => request.idempotency === null
      ? randomUUID()
      : uuidv5(`${request.idempotency.key}\n${purpose}`, KEY_NAMESPACE)
  })

  /** A preHandler hook for mutating routes: replays, refuses, or lets the request through. */
  fastify.decorate('idempotent', async (request: FastifyRequest, reply: FastifyReply) => {
    const key = request.headers['idempotency-key']
    if (key === undefined || request.method === 'GET') return
    if (typeof key !== 'string' || !KEY_PATTERN.test(key)) {
      throw new ApiProblem(400, 'Bad Request', 'headers.idempotency-key: must be 1 to 255 printable ASCII characters', [
        { path: 'headers.idempotency-key', message: 'must be 1 to 255 printable ASCII characters' }
      ])
    }
    const hash = requestHash(request)
    // Claims the key, or takes over a claim abandoned by a process that died mid-request.
    const claimed = await fastify.db.query(
      `INSERT INTO idempotency_keys (principal, key, request_hash) VALUES ($1, $2, $3)
       ON CONFLICT (principal, key) DO UPDATE SET request_hash = EXCLUDED.request_hash, claimed_at = now()
         WHERE idempotency_keys.status IS NULL
           AND idempotency_keys.claimed_at < now() - $4 * interval '1 second'
       RETURNING 1`,
      [PRINCIPAL, key, hash, ABANDONED_CLAIM_SECONDS]
    )
    if (claimed.rowCount === 1) {
      request.idempotency = { key, hash }
      return
    }
    const { rows } = await fastify.db.query(
      'SELECT request_hash, status, content_type, response FROM idempotency_keys WHERE principal = $1 AND key = $2',
      [PRINCIPAL, key]
    )
    // Gone between the two statements: its request failed (5xx) and gave the claim back.
    if (rows.length === 0 || rows[0].status === null) {
      reply.header('retry-after', '1')
      throw new ApiProblem(409, 'Conflict', `a request with Idempotency-Key ${key} is still in progress; retry once it has been answered`)
    }
    if (rows[0].request_hash !== hash) {
      throw new ApiProblem(422, 'Unprocessable Content', `Idempotency-Key ${key} was used for another request`)
    }
    return await reply.code(rows[0].status).type(rows[0].content_type).header('idempotency-replayed', 'true').send(rows[0].response)
  })

  // The first answer under a key is kept, errors included, but not a failure of ours (5xx):
  // trying again is what a key is for, so the claim is given back.
  fastify.addHook('onSend', async (request, reply, payload) => {
    if (request.idempotency === null || reply.getHeader('idempotency-replayed') !== undefined) return payload
    const { key, hash } = request.idempotency
    if (reply.statusCode >= 500) {
      await fastify.db.query('DELETE FROM idempotency_keys WHERE principal = $1 AND key = $2 AND request_hash = $3 AND status IS NULL', [PRINCIPAL, key, hash])
      return payload
    }
    await fastify.db.query(
      `UPDATE idempotency_keys SET status = $4, content_type = $5, response = $6
        WHERE principal = $1 AND key = $2 AND request_hash = $3 AND status IS NULL`,
      [
        PRINCIPAL,
        key,
        hash,
        reply.statusCode,
        String(reply.getHeader('content-type') ?? 'application/json'),
        typeof payload === 'string' ? payload : JSON.stringify(payload)
      ]
    )
    return payload
  })
}, { name: 'idempotency', dependencies: ['database'] })

declare module 'fastify' {
  interface FastifyInstance {
    idempotent: (request: FastifyRequest, reply: FastifyReply) => Promise<void>
  }
}
