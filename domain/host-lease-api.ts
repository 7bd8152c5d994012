/**
 * A host's lease as its agent renews it from the control plane's API (`PUT /v1/hosts/:id/lease`,
 * docs/design.md §17): the request, which acknowledges the last grant the agent took, and the
 * grant that answers it. Shared by the API, which validates the request and the answer with them,
 * and the agent, which validates the answer.
 */
import { z } from 'zod'
import { leasePeerSchema } from './host-agent-api.js'

export const leaseRenewalSchema = z.strictObject({
  /** The timeout of the watchdog the agent pets while it holds its lease. */
  watchdogMs: z.number().int().min(1).max(3_600_000),
  /** The last grant the agent took (its `grantedAt`): the acknowledgement; null for none. */
  took: z.number().min(0).max(Number.MAX_SAFE_INTEGER).nullable()
})
export type LeaseRenewal = z.infer<typeof leaseRenewalSchema>

/** The host's lease, granted in answer to a renewal: its term runs from when the agent sent it. */
export const leaseGrantSchema = z.strictObject({
  /** When the control plane recorded the grant (epoch ms on its clock): what the agent acknowledges. */
  grantedAt: z.number(),
  termMs: z.number().int().min(1_000).max(3_600_000),
  /** The oldest renewal whose grant the agent may take, and how long it waits for its peers. */
  grantMaxAgeMs: z.number().int().min(1).max(3_600_000),
  peerAskMs: z.number().int().min(1).max(3_600_000),
  /** Every other host registered when the lease was granted. */
  peers: z.array(leasePeerSchema).max(10_000)
})
export type LeaseGrant = z.infer<typeof leaseGrantSchema>
