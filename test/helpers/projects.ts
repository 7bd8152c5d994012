/**
 * The fault tests' second project (docs/design.md §18): the crash campaign and the storms put
 * every other instance in it, beside `default`, so that every fault they inject meets two projects'
 * instances, with their counts unchanged.
 */
import { sendUntilAnswered } from './retrying-client.js'

/** `default` and a second project, by name. */
export type ProjectPair = readonly [string, string]

/**
 * Makes the second project, with a network of its own named `default` (as the stack gives the
 * `default` project), unless it exists.
 */
export async function ensureSecondProject (stack: { apiUrl: string, apiToken: string }, name: string, cidr: string): Promise<ProjectPair> {
  for (const [path, body] of [['/v1/projects', { name }], [`/v1/projects/${name}/networks`, { name: 'default', cidr }]] as const) {
    const answer = await sendUntilAnswered(stack, 'POST', path, body)
    if (answer.status !== 201 && answer.status !== 409) throw new Error(`POST ${path} answered ${answer.status}: ${JSON.stringify(answer.body)}`)
  }
  return ['default', name]
}

/** The path of the project the `index`th instance is in: every other one in each. */
export function projectPathOf (projects: ProjectPair, index: number): string {
  return `/v1/projects/${projects[index % 2]!}`
}
