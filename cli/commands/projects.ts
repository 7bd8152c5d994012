/**
 * `vmplane projects list|get|create|delete`, `vmplane quotas get|set` and `vmplane tokens
 * list|create|revoke`: tenancy (docs/design.md §18). Quotas and tokens are the `--project`'s; with
 * `--fleet`, tokens are the fleet's.
 */
import { Option, type Command } from 'commander'
import type { NewToken, Project, ProjectList, Quotas, Token, TokenList } from '../api-types.js'
import { wholeNumber } from '../arguments.js'
import { contextOf, show, type Context } from '../context.js'
import { newTokenDetail, projectTable, quotasTable, tokenTable } from '../views.js'
import { FLEET_ROLES, PROJECT_ROLES } from '../../domain/access-policy.js'
import { QUOTA_RESOURCES } from '../../domain/projects.js'

/** Each quota's option: `--memory-mib`, `--no-memory-mib-limit`. */
const QUOTA_FLAGS = { vcpus: 'vcpus', memoryMiB: 'memory-mib', diskGiB: 'disk-gib', instances: 'instances', addresses: 'addresses' } as const

const PROJECT = '<project>'
const PROJECT_HELP = 'the project, by name or ID'

export function addProjectCommands (program: Command): void {
  const projects = program.command('projects').description('the projects that own instances and networks')

  projects.command('list')
    .description('list the projects this token may see')
    .action(async (_options: unknown, command: Command) => {
      const context = await contextOf(command)
      show(context, await context.api.get<ProjectList>('/v1/projects'), (list) => projectTable(list.items))
    })

  projects.command('get')
    .description('show a project')
    .argument(PROJECT, PROJECT_HELP)
    .action(async (project: string, _options: unknown, command: Command) => {
      const context = await contextOf(command)
      show(context, await context.api.get<Project>(`/v1/projects/${encodeURIComponent(project)}`), (p) => projectTable([p]))
    })

  projects.command('create')
    .description('create a project, with no quota limits (a fleet operator\'s token)')
    .argument('<name>', 'lower-case letters, digits and dashes')
    .action(async (name: string, _options: unknown, command: Command) => {
      const context = await contextOf(command)
      show(context, await context.api.change<Project>('POST', '/v1/projects', { name }), (p) => projectTable([p]))
    })

  projects.command('delete')
    .description('delete a project that owns no live instance or network; its tokens are revoked')
    .argument(PROJECT, PROJECT_HELP)
    .action(async (project: string, _options: unknown, command: Command) => {
      const context = await contextOf(command)
      await context.api.change('DELETE', `/v1/projects/${encodeURIComponent(project)}`)
      show(context, { deleted: project }, () => `deleted project ${project}`)
    })

  const quotas = program.command('quotas').description("the --project's quotas and what it uses")

  quotas.command('get')
    .description("show the project's quotas and use")
    .action(async (_options: unknown, command: Command) => {
      const context = await contextOf(command)
      show(context, await context.api.get<Quotas>(`${context.project}/quotas`), quotasTable)
    })

  const set = quotas.command('set')
    .description("set the project's quotas (a fleet operator's token); those not given stay")
  const flags = QUOTA_RESOURCES.map((resource) => ({
    resource,
    limit: new Option(`--${QUOTA_FLAGS[resource]} <n>`, `the limit on ${resource}`).argParser(wholeNumber),
    none: new Option(`--no-${QUOTA_FLAGS[resource]}-limit`, `no limit on ${resource}`)
  }))
  for (const { limit, none } of flags) set.addOption(limit).addOption(none)
  set.action(async (options: Record<string, number | boolean | undefined>, command: Command) => {
    const context = await contextOf(command)
    // A number sets the limit, `--no-…-limit` takes it away (null), and one not named stays.
    const limits: Record<string, number | null> = {}
    for (const { resource, limit, none } of flags) {
      const value = options[limit.attributeName()]
      if (typeof value === 'number') limits[resource] = value
      if (options[none.attributeName()] === false) limits[resource] = null
    }
    show(context, await context.api.change<Quotas>('PUT', `${context.project}/quotas`, limits), quotasTable)
  })

  const tokens = program.command('tokens').description("the --project's API tokens, or with --fleet the fleet's")

  tokens.command('list')
    .description('list the tokens, newest first (never their secrets)')
    .option('--fleet', "the fleet's tokens")
    .action(async (options: { fleet?: boolean }, command: Command) => {
      const context = await contextOf(command)
      show(context, await context.api.get<TokenList>(tokensPath(context, options)), (list) => tokenTable(list.items))
    })

  tokens.command('create')
    .description('make a token; it is printed this once')
    .argument('<name>', 'who or what it is for')
    .addOption(new Option('--role <role>', 'its role').choices([...PROJECT_ROLES, ...FLEET_ROLES]).makeOptionMandatory())
    .option('--fleet', 'a fleet token (a fleet role)')
    .option('--expires-in-days <days>', 'how long it lives (default 90, at most 366)', wholeNumber)
    .action(async (name: string, options: { role: string, fleet?: boolean, expiresInDays?: number }, command: Command) => {
      const context = await contextOf(command)
      const made = await context.api.change<NewToken>('POST', tokensPath(context, options), { name, role: options.role, expiresInDays: options.expiresInDays })
      show(context, made, newTokenDetail)
    })

  tokens.command('revoke')
    .description('revoke a token: refused from its next request on')
    .argument('<token-id>', "the token's ID (tokens list)")
    .option('--fleet', 'a fleet token')
    .action(async (tokenId: string, options: { fleet?: boolean }, command: Command) => {
      const context = await contextOf(command)
      show(context, await context.api.change<Token>('DELETE', `${tokensPath(context, options)}/${encodeURIComponent(tokenId)}`), (t) => tokenTable([t]))
    })
}

function tokensPath (context: Context, options: { fleet?: boolean }): string {
  return options.fleet === true ? '/v1/tokens' : `${context.project}/tokens`
}
