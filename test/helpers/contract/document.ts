/**
 * An OpenAPI document as a contract to hold answers to. The document is first checked against
 * the OpenAPI schema for its version (@seriousme/openapi-schema-validator), then dereferenced;
 * each answer is held to the operation it was sent to: its status must be documented, its
 * content type must be one documented for that status, and its body must validate against the
 * schema for both (Ajv, JSON Schema 2020-12, as OpenAPI 3.1 writes schemas).
 */
import { Validator } from '@seriousme/openapi-schema-validator'
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'

export type JsonSchema = Record<string, any>

export interface Parameter {
  name: string
  in: 'path' | 'query' | 'header'
  required: boolean
  schema: JsonSchema
}

export interface Operation {
  method: string
  /** The path as the document writes it, `{id}` for a parameter. */
  path: string
  parameters: Parameter[]
  requestBody: { required: boolean, schema: JsonSchema } | null
  /** The documented statuses, each with its content types and their schemas. */
  responses: Record<string, Record<string, JsonSchema>>
}

export interface Answer {
  status: number
  contentType: string | null
  body: string
}

export class Contract {
  private readonly validators = new Map<string, ValidateFunction>()
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true })

  private constructor (readonly operations: Operation[]) {
    addFormats.default(this.ajv)
  }

  /** Checks the document, then makes a contract of it; throws naming what is wrong with it. */
  static async of (document: unknown): Promise<Contract> {
    const validator = new Validator()
    const result = await validator.validate(document as Record<string, unknown>)
    if (!result.valid) throw new Error(`the document is not valid OpenAPI: ${JSON.stringify(result.errors)}`)
    const resolved = validator.resolveRefs() as { paths: Record<string, Record<string, any>> }
    const operations: Operation[] = []
    for (const [path, methods] of Object.entries(resolved.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        operations.push({
          method: method.toUpperCase(),
          path,
          parameters: (operation.parameters ?? []).map((p: any) => ({ name: p.name, in: p.in, required: p.required === true, schema: p.schema })),
          requestBody: operation.requestBody === undefined
            ? null
            : { required: operation.requestBody.required === true, schema: operation.requestBody.content['application/json'].schema },
          responses: Object.fromEntries(Object.entries(operation.responses as Record<string, any>).map(([status, response]) => [
            status,
            Object.fromEntries(Object.entries(response.content ?? {}).map(([type, media]: [string, any]) => [type, media.schema ?? {}]))
          ]))
        })
      }
    }
    return new Contract(operations)
  }

  /** What is wrong with an answer to `operation`, by its document; empty if nothing. */
  breaches (operation: Operation, answer: Answer): string[] {
    const documented = operation.responses[String(answer.status)]
    if (documented === undefined) return [`${answer.status} is not documented`]
    const types = Object.keys(documented)
    if (types.length === 0) return answer.body === '' ? [] : [`${answer.status} is documented without a body, yet has one`]
    const type = types.find((t) => answer.contentType?.split(';')[0]?.trim() === t)
    if (type === undefined) return [`${answer.status} answered as ${answer.contentType ?? 'no content type'}, documented as ${types.join(' or ')}`]
    // A JSON media type is parsed; text (a console log) is validated as the string it is.
    let body: unknown = answer.body
    if (type === 'application/json' || type.endsWith('+json')) {
      try {
        body = JSON.parse(answer.body)
      } catch {
        return [`${answer.status} body is not JSON: ${answer.body.slice(0, 200)}`]
      }
    }
    const validate = this.validatorFor(operation, String(answer.status), type, documented[type]!)
    return validate(body) ? [] : [`${answer.status} body does not match the document: ${this.ajv.errorsText(validate.errors)}`]
  }

  private validatorFor (operation: Operation, status: string, type: string, schema: JsonSchema): ValidateFunction {
    const key = `${operation.method} ${operation.path} ${status} ${type}`
    let validate = this.validators.get(key)
    if (validate === undefined) {
      validate = this.ajv.compile(schema)
      this.validators.set(key, validate)
    }
    return validate
  }
}
