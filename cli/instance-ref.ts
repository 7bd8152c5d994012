/**
 * Instances are named on the command line by ID or by name: people remember `web-1`, scripts keep
 * IDs. An argument shaped like a UUID is taken as an ID; anything else is looked up as a name
 * among the live instances (names are unique among them). A destroyed instance's name may have
 * been reused, so it is found by ID only.
 */
import type { InstanceList } from './api-types.js'
import type { Context } from './context.js'
import { CliError, EXIT } from './errors.js'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** The ID of the instance of the context's project. */
export async function instanceId ({ api, project }: Context, ref: string): Promise<string> {
  if (UUID.test(ref)) return ref
  let cursor: string | null = null
  do {
    const query: string = cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`
    const page: InstanceList = await api.get<InstanceList>(`${project}/instances?limit=500${query}`)
    const found = page.items.find((instance) => instance.name === ref)
    if (found !== undefined) return found.id
    cursor = page.nextCursor
  } while (cursor !== null)
  throw new CliError(`no live instance is named ${ref} (a destroyed one is found by its ID only)`, EXIT.refused)
}
