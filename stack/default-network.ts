/**
 * The dev stack's `default` network, which an instance's interface is on when its create names
 * none (api/services/instance-resources.ts): made through the API once the stack is ready, unless
 * it exists. Its range is only an address space here: the hosts' bridges carry no address and
 * route nothing, so it cannot meet a real network.
 */
import { DEFAULT_NETWORK } from '../domain/interfaces.js'
import { api } from './api-requests.js'

/** 65,533 addresses: room for the crash campaign's 4,000 instances many times over. */
export const DEFAULT_NETWORK_CIDR = '10.77.0.0/16'

export async function ensureDefaultNetwork (stack: { apiUrl: string, apiToken: string }): Promise<'created' | 'existed'> {
  const client = api(stack)
  const existing = await client.request('GET', `/v1/networks/${DEFAULT_NETWORK}`)
  if (existing.status === 200) return 'existed'
  const created = await client.request('POST', '/v1/networks', { name: DEFAULT_NETWORK, cidr: DEFAULT_NETWORK_CIDR })
  if (created.status !== 201) throw new Error(`cannot create the default network: ${created.status} ${JSON.stringify(created.body)}`)
  return 'created'
}
