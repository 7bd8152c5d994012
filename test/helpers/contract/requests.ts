/**
 * Requests made from an OpenAPI document: valid ones, their values generated from the schemas
 * (json-schema-faker, seeded), and hostile variations of a valid one, each breaking exactly one
 * thing the document says (a wrong type, a bound crossed by one, a control character, an unpaired
 * surrogate, a huge or empty value, a bad content type or body, a missing or wrong token), so
 * that every hostile request must be refused with a 4xx and change nothing.
 */
import { createGeneratorSync } from 'json-schema-faker'
import { API_BODY_LIMIT_BYTES } from '../../../api/server.js'
import { AGENT_BODY_LIMIT_BYTES } from '../../../host-agent/http/app.js'
import type { JsonSchema, Operation, Parameter } from './document.js'

export interface ContractRequest {
  operation: Operation
  /** `valid`, or which hostile variation this is, for the counts and for failure messages. */
  variation: string
  method: string
  /** The path and query exactly as sent, percent-encoded by hand where a variation needs it. */
  url: string
  headers: Record<string, string>
  body: string | null
}

/** What the test knows and the document does not: which IDs exist, which token to send. */
export interface RequestContext {
  /** A value for a path parameter of a valid request. */
  pathValue: (operation: Operation, name: string) => string
  /** The headers of a valid request (its token). */
  headers: (operation: Operation) => Record<string, string>
  /** Adjusts a valid request's generated query or body, e.g. to keep `?wait=` short. */
  adjust?: (operation: Operation, part: 'query' | 'body', value: Record<string, unknown>) => Record<string, unknown>
  /** Tokens a hostile request may carry instead: wrong ones, and one that may read but not write. */
  viewerToken: string
}

/** A valid request, or its parts, before it is written out. */
export interface RequestParts {
  path: Record<string, string>
  /** Query values, already strings; an array repeats the parameter. */
  query: Record<string, string | string[]>
  headers: Record<string, string>
  body: unknown
  /** The body as sent, when it is not `body` as JSON. */
  rawBody?: string | null
}

/** Longer than either server takes in a body. */
const LONG = 'x'.repeat(Math.max(API_BODY_LIMIT_BYTES, AGENT_BODY_LIMIT_BYTES) + 1024)

export class RequestMaker {
  private readonly generator

  constructor (private readonly context: RequestContext, seed: number) {
    this.generator = createGeneratorSync({ seed })
  }

  valid (operation: Operation): RequestParts {
    const path = Object.fromEntries(paramsIn(operation, 'path').map((p) => [p.name, this.context.pathValue(operation, p.name)]))
    let query: Record<string, unknown> = {}
    for (const p of paramsIn(operation, 'query')) {
      if (p.required || this.generator.generate({ type: 'boolean' }) === true) query[p.name] = this.generator.generate(p.schema)
    }
    query = this.context.adjust?.(operation, 'query', query) ?? query
    let body: unknown
    if (operation.requestBody !== null) {
      const generated = this.generator.generate(operation.requestBody.schema)
      body = generated === null || typeof generated !== 'object' ? generated : (this.context.adjust?.(operation, 'body', generated as Record<string, unknown>) ?? generated)
    }
    return {
      path,
      query: Object.fromEntries(Object.entries(query).map(([name, value]) => [name, String(value)])),
      headers: this.context.headers(operation),
      body
    }
  }

  /** Every hostile variation of a valid request. */
  hostile (operation: Operation, base: RequestParts): ContractRequest[] {
    return [
      ...this.tokenVariations(operation, base),
      ...pathVariations(operation, base),
      ...queryVariations(operation, base),
      ...headerVariations(operation, base),
      ...bodyVariations(operation, base)
    ]
  }

  private tokenVariations (operation: Operation, base: RequestParts): ContractRequest[] {
    if (operation.responses['401'] === undefined) return []
    const token = (base.headers.authorization ?? '').replace(/^Bearer /, '')
    const variations: Array<[string, string | null]> = [
      ['no token', null],
      ['scheme without token', 'Bearer'],
      ['empty token', 'Bearer '],
      ['wrong token', 'Bearer not-the-token-at-all-0000'],
      ['token with a suffix', `Bearer ${token}x`],
      ['token cut short', `Bearer ${token.slice(0, -1)}`],
      ['basic credentials', `Basic ${Buffer.from(`operator:${token}`).toString('base64')}`],
      ['token of 20 KiB', `Bearer ${'t'.repeat(20 * 1024)}`]
    ]
    if (operation.responses['403'] !== undefined && !['GET', 'HEAD'].includes(operation.method.toUpperCase())) variations.push(['viewer token on a mutation', `Bearer ${this.context.viewerToken}`])
    return variations.map(([variation, authorization]) => {
      const headers = { ...base.headers }
      delete headers.authorization
      if (authorization !== null) headers.authorization = authorization
      return write(operation, `authorization: ${variation}`, { ...base, headers })
    })
  }
}

function paramsIn (operation: Operation, where: Parameter['in']): Parameter[] {
  return operation.parameters.filter((p) => p.in === where)
}

/** Writes a request out: path parameters into the path, the query, the body as JSON. */
export function write (operation: Operation, variation: string, parts: RequestParts): ContractRequest {
  const path = operation.path.replace(/\{(\w+)\}/g, (_, name: string) => parts.path[name] ?? '')
  const query = Object.entries(parts.query)
    .flatMap(([name, value]) => [value].flat().map((v) => v === BARE ? name : `${name}=${percentEncode(v)}`))
    .join('&')
  const body = parts.rawBody !== undefined ? parts.rawBody : parts.body === undefined ? null : JSON.stringify(parts.body)
  const headers = { ...parts.headers }
  if (body !== null && parts.rawBody === undefined) headers['content-type'] = 'application/json'
  return { operation, variation, method: operation.method, url: query === '' ? path : `${path}?${query}`, headers, body }
}

/** Path parameters that are not what the document says, percent-encoded as a client would send them, or could. */
const PATH_VALUES: Array<[string, string]> = [
  ['not a UUID', 'not-an-id'],
  ['NUL byte', '%00'],
  ['overlong UTF-8', '%C0%AF'],
  ['encoded surrogate', '%ED%A0%80'],
  ['101 characters', 'a'.repeat(101)],
  ['dot segment', '%2E%2E'],
  ['UUID with a space', '00000000-0000-4000-8000-00000000000%20'],
  ['non-ASCII', '%C3%A9'],
  ['UUID and more', '00000000-0000-4000-8000-000000000000x']
]

function pathVariations (operation: Operation, base: RequestParts): ContractRequest[] {
  return paramsIn(operation, 'path').flatMap((param) => PATH_VALUES.map(([variation, value]) => {
    const request = write(operation, `path ${param.name}: ${variation}`, { ...base, path: { ...base.path } })
    // Written into the path as is: these are already encoded, and some are meant to be invalid.
    request.url = request.url.replace(encodeURIComponent(base.path[param.name] ?? ''), value)
    return request
  }))
}

/** A query value that sends the parameter's name alone (`?wait`). */
const BARE = '\u0000bare'

/**
 * Percent-encodes a query value as UTF-8, and an unpaired surrogate (which UTF-8 cannot hold,
 * and encodeURIComponent refuses) as the three bytes a careless encoder would write for it.
 */
function percentEncode (value: string): string {
  return Array.from(value, (char) => {
    const unit = char.charCodeAt(0)
    if (char.length === 1 && unit >= 0xd800 && unit <= 0xdfff) {
      return [0xe0 | (unit >> 12), 0x80 | ((unit >> 6) & 0x3f), 0x80 | (unit & 0x3f)]
        .map((byte) => `%${byte.toString(16).toUpperCase()}`).join('')
    }
    return encodeURIComponent(char)
  }).join('')
}

/** Query values a schema refuses, by the schema's type. */
function badQueryValues (schema: JsonSchema): Array<[string, string | string[]]> {
  if (schema.type === 'integer') {
    const values: Array<[string, string | string[]]> = [
      ['empty', ''], ['bare', BARE], ['negative', '-1'], ['plus sign', '+1'], ['fraction', '1.5'],
      ['exponent', '1e1'], ['leading space', ' 1'], ['word', 'abc'], ['400 digits', '9'.repeat(400)],
      ['repeated', ['1', '2']], ['NUL byte', '1\u0000']
    ]
    if (schema.maximum !== undefined) values.push(['above the maximum', String(schema.maximum + 1)])
    if (schema.minimum !== undefined && schema.minimum > 0) values.push(['below the minimum', String(schema.minimum - 1)])
    return values
  }
  if (schema.enum !== undefined) return [['not a member', 'not-a-member'], ['empty', ''], ['upper case', String(schema.enum[0]).toUpperCase()]]
  const values: Array<[string, string | string[]]> = [['NUL byte', 'a\u0000b'], ['unpaired surrogate', '\ud800'], ['newline', 'a\nb'], ['repeated', ['a', 'b']]]
  if (schema.maxLength !== undefined) values.push(['over maxLength', 'a'.repeat(schema.maxLength + 1)])
  return values
}

function queryVariations (operation: Operation, base: RequestParts): ContractRequest[] {
  const unknown = write(operation, 'query: unknown parameter', { ...base, query: { ...base.query, bogus: '1' } })
  return [unknown, ...paramsIn(operation, 'query').flatMap((param) => badQueryValues(param.schema).map(([variation, value]) =>
    write(operation, `query ${param.name}: ${variation}`, { ...base, query: { ...base.query, [param.name]: value } })))]
}

function headerVariations (operation: Operation, base: RequestParts): ContractRequest[] {
  return paramsIn(operation, 'header').flatMap((param) => {
    const values: Array<[string, string]> = [['empty', ''], ['over 255 characters', 'k'.repeat(256)], ['non-ASCII', 'clé']]
    return values.map(([variation, value]) => write(operation, `header ${param.name}: ${variation}`, { ...base, headers: { ...base.headers, [param.name]: value } }))
  })
}

/** Values of a body property that its schema refuses. */
function badValues (schema: JsonSchema): Array<[string, unknown]> {
  const notThisType: Array<[string, unknown]> = [['null', null], ['an array', []], ['an object', {}]]
  if (schema.type === 'string') {
    const values: Array<[string, unknown]> = [...notThisType, ['a number', 42], ['NUL byte', 'a\u0000b'], ['unpaired surrogate', 'a\ud800'], ['newline', 'a\nb'], ['tab', 'a\tb'], ['DEL', 'a\u007f']]
    if (schema.maxLength !== undefined) values.push(['over maxLength', 'a'.repeat(schema.maxLength + 1)])
    if (schema.enum !== undefined) values.push(['not a member', 'not-a-member'])
    if (schema.format === 'date-time') values.push(['not a date-time', 'tomorrow'])
    return values
  }
  if (schema.type === 'integer' || schema.type === 'number') {
    const values: Array<[string, unknown]> = [...notThisType, ['a string', '1'], ['a boolean', true], ['the largest double', Number.MAX_VALUE]]
    if (schema.type === 'integer') values.push(['a fraction', 1.5])
    if (schema.minimum !== undefined) values.push(['below the minimum', schema.minimum - 1])
    if (schema.maximum !== undefined) values.push(['above the maximum', schema.maximum + 1])
    return values
  }
  if (schema.type === 'boolean') return [...notThisType, ['a string', 'true'], ['a number', 1]]
  if (schema.type === 'object') return [['null', null], ['an array', []], ['a string', 'x'], ['an unknown property', { bogus: 1 }]]
  return []
}

/** Each property of an object schema, with its path, depth first. */
function properties (schema: JsonSchema, path: string[] = []): Array<{ path: string[], schema: JsonSchema, required: boolean }> {
  if (schema.type !== 'object' || schema.properties === undefined) return []
  return Object.entries(schema.properties as Record<string, JsonSchema>).flatMap(([name, property]) => [
    { path: [...path, name], schema: property, required: (schema.required ?? []).includes(name) },
    ...properties(property, [...path, name])
  ])
}

function withValue (body: unknown, path: string[], value: unknown): unknown {
  const copy = structuredClone(body) as Record<string, any>
  let node = copy
  for (const key of path.slice(0, -1)) {
    node[key] ??= {}
    node = node[key]
  }
  if (value === undefined) delete node[path.at(-1)!]
  else node[path.at(-1)!] = value
  return copy
}

function bodyVariations (operation: Operation, base: RequestParts): ContractRequest[] {
  // A GET's body means nothing in HTTP, and is not read.
  if (operation.method === 'GET' || operation.method === 'HEAD') return []
  const json = { ...base.headers, 'content-type': 'application/json' }
  const raw = (variation: string, body: string, headers: Record<string, string> = json): ContractRequest =>
    write(operation, `body: ${variation}`, { ...base, headers, rawBody: body })
  const requests = [
    raw('over the size limit', JSON.stringify({ padding: LONG })),
    raw('not JSON', '{"unterminated'),
    raw('text/plain', 'hello', { ...base.headers, 'content-type': 'text/plain' }),
    raw('a form', 'a=1&b=2', { ...base.headers, 'content-type': 'application/x-www-form-urlencoded' }),
    raw('XML', '<a/>', { ...base.headers, 'content-type': 'application/xml' })
  ]
  const schema = operation.requestBody?.schema
  if (schema === undefined) return requests
  const object = schema.type === 'object' ? schema : (schema.anyOf as JsonSchema[] | undefined)?.find((s) => s.type === 'object')
  const nullable = schema.anyOf?.some((s: JsonSchema) => s.type === 'null') === true
  requests.push(raw('an array', '[]'), raw('a string', '"x"'), raw('a number', '42'))
  if (!nullable) requests.push(raw('null', 'null'))
  // An empty body where none is needed may be read as none (the agent does): hostile only where one is.
  if (operation.requestBody?.required === true) {
    requests.push(write(operation, 'body: none', { ...base, rawBody: null }), raw('empty with a JSON content type', ''))
  }
  if (object === undefined) return requests
  const body = base.body ?? {}
  requests.push(write(operation, 'body: an unknown property', { ...base, body: withValue(body, ['bogus'], 1) }))
  for (const property of properties(object)) {
    const name = property.path.join('.')
    if (property.required) requests.push(write(operation, `body ${name}: missing`, { ...base, body: withValue(body, property.path, undefined) }))
    for (const [variation, value] of badValues(property.schema)) {
      requests.push(write(operation, `body ${name}: ${variation}`, { ...base, body: withValue(body, property.path, value) }))
    }
  }
  return requests
}
