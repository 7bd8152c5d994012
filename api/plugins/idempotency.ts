/**
 * `Idempotency-Key` on every mutating request (I3).
 *
 * With a key, every ID a request creates (the instance's, the operation's, its disks' and
 * interfaces') is derived from the key, so a client that retries after losing an answer — or
 * after this API crashed mid-request — finds what the first attempt made instead of making a
 * second one. The first answer is kept for a day: the same key with the same request gets it
 * again (`Idempotency-Replayed: true`). Without a key, IDs are random.
 *
 * A key is bound to its request (the hash of its method, URL and body) from its first claim, for
 * as long as the key is kept: another request under the key is refused with 422, whether the
 * first is answered, in progress or over without an answer. Were another request let in, it would
 * make its things under the IDs the first one's already have: it would find the first one's
 * network and answer it as its own, or collide with the instance and workflow the first one
 * started.
 *
 * A key is claimed in PostgreSQL before its request does anything, so the claim holds across API
 * replicas. The same request sent again meanwhile, to this process or another, is refused with
 * 409 and `Retry-After` (the IETF draft's answer), so the attempts of a request answer one at a
 * time. A claim is a short lease that its process renews while the request runs (held by `?wait=`
 * for minutes, say): a claim of an API process that died lapses within the lease, and the client
 * retrying with its key on another replica then runs the request afresh, finding what the first
 * attempt made. A failure of ours (5xx) gives the claim back (its lease ends, the key stays bound),
 * so a retry runs afresh at once; a claim that could not be given back (PostgreSQL was down) is
 * taken over at once by the API process that made it, which knows the request is over, and by any
 * other once it lapses. Should a request outlive its claim (PostgreSQL down while it ran), the IDs
 * it makes are still the key's and its request's, so a second attempt running meanwhile finds
 * what the first made. Its statements are db/idempotency-keys.ts's. */
import { createHash, randomUUID } from 'node:crypto'
import type { FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { v5 as uuidv5 } from 'uuid'
import { claimKey, giveBackClaim, keepAnswer, readKey, renewClaims } from '../../db/idempotency-keys.js'
import { IDEMPOTENCY_KEY_PATTERN, IDEMPOTENCY_KEY_RULE } from '../schemas/common.js'
import { ApiProblem } from './problem-details.js'

/** The namespace of IDs derived from idempotency keys (a fixed, random UUID). */
const KEY_NAMESPACE = '6f2a8b4e-3d1c-4e7a-9b5f-0c8d2e1a7f34'
/**
 * How long a claim lasts unless its process renews it, and how often the process does: a client
 * whose API replica died waits at most the lease before another replica takes its retry.
 */
const CLAIM_LEASE_SECONDS = 10
const CLAIM_RENEW_MS = 3000

/** Makes the ID of something a request creates (`purpose` tells them apart): derived from its key, if any. */
export type NewId = (purpose: string) => string

declare module 'fastify' {
  interface FastifyRequest {
    newId: NewId
    idempotency: { key: string, hash: string, principal: string } | null
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

export default fp(async (fastify) => {
  /**
   * This process, as the maker of claims, and the keys of its requests in progress, by their
   * principal: a key belongs to the token that sent it (its ID), so two tokens' keys never meet.
   */
  const processId = randomUUID()
  const inProgress = new Map<string, Set<string>>()
  const isInProgress = (principal: string, key: string): boolean => inProgress.get(principal)?.has(key) === true
  const renewal = setInterval(() => {
    for (const [principal, keys] of inProgress) {
      // A renewal PostgreSQL missed is made up by the next, within the lease.
      renewClaims(fastify.db, principal, [...keys], processId, CLAIM_LEASE_SECONDS).catch((err: unknown) => { fastify.log.warn({ err }, 'could not renew the claims of Idempotency-Keys in progress') })
    }
  }, CLAIM_RENEW_MS)
  fastify.addHook('onClose', async () => { clearInterval(renewal) })
  fastify.decorateRequest('idempotency', null)
  fastify.decorateRequest('newId', () => { throw new Error('newId is set by the onRequest hook') })
  // A function of its own per request, so handlers can pass it on unbound.
  fastify.addHook('onRequest', async (request) => {
    // The token's ID is part of it: two tokens sending the same key make different things.
    request.newId = (purpose: string) => request.idempotency === null
      ? randomUUID()
      : uuidv5(`${request.idempotency.principal}\n${request.idempotency.key}\n${purpose}`, KEY_NAMESPACE)
  })

  /** A preHandler hook for mutating routes: replays, refuses, or lets the request through. */
  fastify.decorate('idempotent', async (request: FastifyRequest, reply: FastifyReply) => {
    const key = request.headers['idempotency-key']
    if (key === undefined || request.method === 'GET') return
    if (typeof key !== 'string' || !IDEMPOTENCY_KEY_PATTERN.test(key)) {
      throw new ApiProblem(400, 'Bad Request', `headers.idempotency-key: ${IDEMPOTENCY_KEY_RULE}`, [
        { path: 'headers.idempotency-key', message: IDEMPOTENCY_KEY_RULE }
      ])
    }
    const hash = requestHash(request)
    const principal = request.principal.tokenId
    // Claims the key, binding it to this request; or, for this request only, takes over a claim
    // that was given back, lapsed, or that this process left.
    const claimed = await claimKey(fastify.db, {
      principal, key, processId, requestHash: hash, leaseSeconds: CLAIM_LEASE_SECONDS, ownClaimInProgress: isInProgress(principal, key)
    })
    if (claimed) {
      request.idempotency = { key, hash, principal }
      inProgress.set(principal, (inProgress.get(principal) ?? new Set()).add(key))
      return
    }
    const kept = await readKey(fastify.db, principal, key)
    if (kept !== null && kept.requestHash !== hash) {
      throw new ApiProblem(422, 'Unprocessable Content', `Idempotency-Key ${key} was used for another request`)
    }
    // Gone between the two statements (a day old, purged by the reconciler): a retry claims it afresh.
    if (kept === null || kept.answer === null) {
      reply.header('retry-after', '1')
      throw new ApiProblem(409, 'Conflict', `a request with Idempotency-Key ${key} is still in progress; retry once it has been answered`)
    }
    return await reply.code(kept.answer.status).type(kept.answer.contentType).header('idempotency-replayed', 'true').send(kept.answer.body)
  })

  // The first answer under a key is kept, errors included, but not a failure of ours (5xx):
  // trying again is what a key is for, so the claim is given back, to this request alone.
  fastify.addHook('onSend', async (request, reply, payload) => {
    if (request.idempotency === null || reply.getHeader('idempotency-replayed') !== undefined) return payload
    const { key, hash, principal } = request.idempotency
    const keys = inProgress.get(principal)
    keys?.delete(key)
    if (keys?.size === 0) inProgress.delete(principal)
    if (reply.statusCode >= 500) {
      // PostgreSQL may be what failed: the claim then lapses on its own.
      await giveBackClaim(fastify.db, { principal, key, processId }).catch(() => {})
      return payload
    }
    await keepAnswer(fastify.db, {
      principal,
      key,
      requestHash: hash,
      status: reply.statusCode,
      contentType: String(reply.getHeader('content-type') ?? 'application/json'),
      body: typeof payload === 'string' ? payload : JSON.stringify(payload)
    })
    return payload
  })
}, { name: 'idempotency', dependencies: ['database'] })

declare module 'fastify' {
  interface FastifyInstance {
    idempotent: (request: FastifyRequest, reply: FastifyReply) => Promise<void>
  }
}
