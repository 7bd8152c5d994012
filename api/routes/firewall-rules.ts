/**
 * `/v1/projects/{project}/firewall-rules` (and the unscoped `/v1/firewall-rules`, the `default`
 * project's): what a project allows into and out of its instances beyond their own network's traffic
 * (docs/design.md §19). A change is committed with its generation (db/firewall-rules.ts), then
 * told to the hosts of the instances it concerns by the `applyFirewall` workflow
 * (`firewall-<generation>`); the answer comes once that has started.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { z } from 'zod'
import { deleteRule, findRule, insertRule, instancesConcerned, listRules, type FirewallRule, type RuleInsertProblem } from '../../db/firewall-rules.js'
import { LIMITS } from '../../domain/limits.js'
import { WORKFLOW_TYPES, firewallWorkflowId, type ApplyFirewallInput } from '../../contract/workflows.js'
import { ApiProblem } from '../plugins/problem-details.js'
import { idempotencyHeaders } from '../schemas/common.js'
import { createFirewallRuleBody, firewallRuleListSchema, firewallRuleParamsSchema, firewallRuleSchema } from '../schemas/firewall-rules.js'
import { paramsIn, scopeParams, type RouteScope } from '../schemas/projects.js'

const tags = ['firewall']

function problem (status: 404 | 422, path: string, message: string): ApiProblem {
  return new ApiProblem(status, status === 404 ? 'Not Found' : 'Unprocessable Content', `${path}: ${message}`, [{ path, message }])
}

function insertProblem (refused: RuleInsertProblem): ApiProblem {
  switch (refused.kind) {
    case 'target-missing': return problem(422, 'body.target', 'names no live network or instance of the project')
    case 'peer-missing': return problem(422, 'body.peer', 'names no live network or instance of the project')
    case 'target-full': return problem(422, 'body.target', `has ${LIMITS.firewallRulesPerTarget} firewall rules, as many as a network or an instance may: delete one first`)
  }
}

const routes: FastifyPluginAsyncZod<RouteScope> = async (fastify, scope) => {
  const { db } = fastify
  const withRule = paramsIn(scope, firewallRuleParamsSchema)

  /** Tells the hosts of the instances the rule concerns, under the change's generation. */
  async function apply (rule: FirewallRule, generation: number): Promise<void> {
    const input: ApplyFirewallInput = { instanceIds: await instancesConcerned(db, rule) }
    await fastify.temporal.workflow.start(WORKFLOW_TYPES.firewall, {
      workflowId: firewallWorkflowId(generation),
      taskQueue: fastify.temporalConfig.taskQueue,
      args: [input],
      workflowIdConflictPolicy: 'USE_EXISTING',
      staticSummary: `firewall rules at generation ${generation}: ${input.instanceIds.length} instance(s)`
    })
  }

  fastify.post('/firewall-rules', {
    config: { action: 'project.write' },
    schema: { tags, summary: 'Allow traffic into or out of a network or an instance', ...scopeParams(scope), headers: idempotencyHeaders, body: createFirewallRuleBody, response: { 201: firewallRuleSchema } }
  }, async (request, reply) => {
    const { target, direction, protocol, peer, description } = request.body
    const created = await insertRule(db, {
      id: request.newId('firewall-rule'), projectId: request.project!.id, target, direction, protocol, ports: request.body.ports ?? null, peer, description
    })
    if ('kind' in created) throw insertProblem(created)
    await apply(created.rule, created.generation)
    return await reply.code(201).send(created.rule)
  })

  fastify.get('/firewall-rules', {
    config: { action: 'project.read' },
    schema: { tags, summary: "List the project's firewall rules, oldest first", ...scopeParams(scope), response: { 200: firewallRuleListSchema } }
  }, async (request) => ({ items: await listRules(db, request.project!.id) }))

  fastify.get('/firewall-rules/:rule', {
    config: { action: 'project.read' },
    schema: { tags, summary: 'Get a firewall rule', params: withRule, response: { 200: firewallRuleSchema } }
  }, async (request) => {
    const rule = await findRule(db, request.project!.id, request.params.rule)
    if (rule === null) throw problem(404, 'params.rule', `no firewall rule ${request.params.rule}`)
    return rule
  })

  fastify.delete('/firewall-rules/:rule', {
    config: { action: 'project.write' },
    schema: { tags, summary: 'Delete a firewall rule', headers: idempotencyHeaders, params: withRule, response: { 204: z.null().describe('deleted') } }
  }, async (request, reply) => {
    const rule = await findRule(db, request.project!.id, request.params.rule)
    if (rule === null) throw problem(404, 'params.rule', `no firewall rule ${request.params.rule}`)
    const deleted = await deleteRule(db, request.project!.id, rule.id)
    if (deleted !== null) await apply(rule, deleted.generation)
    return await reply.code(204).send(null)
  })
}

export default routes
