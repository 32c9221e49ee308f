import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js'
import addFormatsModule from 'ajv-formats'
import { EVERY_ROUTE_PROBLEMS } from '../../src/http/openapi/common.ts'
import { openApiDocument } from '../../src/http/openapi.ts'

type Schema = Record<string, unknown>
type Header = { required?: boolean; schema: Schema }
type ResponseObject = { headers?: Record<string, Header>; content?: Record<string, { schema: Schema }> }
type Operation = { operationId: string; responses: Record<string, ResponseObject> }
type Doc = { paths: Record<string, Record<string, Operation>>; components: { schemas: Record<string, Schema> } }

const doc = openApiDocument() as unknown as Doc
// ajv-formats is CommonJS with a default export; under Node's ESM interop it may arrive wrapped.
const addFormats = addFormatsModule.default
const ajv = new Ajv2020({ allErrors: true, strict: true })
addFormats(ajv)
ajv.addKeyword('example')

// The document's `#/components/schemas/X` become `components#/$defs/X` in one schema ajv knows.
const rewrite = (value: unknown): unknown =>
  JSON.parse(JSON.stringify(value), (key, v) =>
    key === '$ref' && typeof v === 'string' ? v.replace('#/components/schemas/', 'components#/$defs/') : v,
  )
ajv.addSchema({ $id: 'components', $defs: rewrite(doc.components.schemas) as Schema })

const compiled = new Map<string, ValidateFunction>()
function validatorFor(key: string, schema: Schema): ValidateFunction {
  let validate = compiled.get(key)
  if (!validate) {
    validate = ajv.compile(rewrite(schema) as Schema)
    compiled.set(key, validate)
  }
  return validate
}

const routes = Object.entries(doc.paths).flatMap(([template, item]) =>
  Object.entries(item).map(([method, operation]) => ({
    method: method.toUpperCase(),
    pattern: new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`),
    operation,
  })),
)

// A path as sent, not as a URL parser would normalize it (`/a/%2e%2e` stays: the server routes it as it came).
const pathOf = (url: string) => (url.startsWith('/') ? url.split('?')[0]! : new URL(url).pathname)

/** The documented operation for a request, or undefined when the document has none. */
export function operationFor(method: string, url: string): Operation | undefined {
  const path = pathOf(url)
  return routes.find((route) => route.method === method.toUpperCase() && route.pattern.test(path))?.operation
}

/**
 * Fails when an answer the server gave is not what the API document promises for that operation:
 * an undocumented status, a missing required header, another content type, or a body that does
 * not match the schema (problem `code` values included). Unknown routes may only answer 404 `not_found`, or
 * what any route may answer before routing (a malformed body, headers too large).
 */
export function assertDocumentedAnswer(
  request: { method: string; url: string },
  answer: { status: number; headers: Headers; text: string },
): void {
  const where = `${request.method} ${pathOf(request.url)} → ${answer.status}`
  const operation = operationFor(request.method, request.url)
  if (!operation) {
    const body = answer.text ? (JSON.parse(answer.text) as { code?: string }) : {}
    if (answer.status === 404 && body.code === 'not_found') return
    // Refused before routing (Node's parser, the JSON parser): what any route may answer, whatever the path.
    const before = (EVERY_ROUTE_PROBLEMS as Record<number, readonly string[]>)[answer.status]
    if (before?.includes(body.code ?? '') && answer.headers.get('content-type')?.startsWith('application/problem+json')) return
    throw new Error(`${where}: no operation in the API document for this request`)
  }
  const status = String(answer.status)
  const response = operation.responses[status] ?? operation.responses[`${status[0]}XX`] ?? operation.responses.default
  if (!response)
    throw new Error(
      `${where}: status not documented for ${operation.operationId} (documented: ${Object.keys(operation.responses).join(', ')})`,
    )
  for (const [name, header] of Object.entries(response.headers ?? {})) {
    const value = answer.headers.get(name)
    if (value === null) {
      if (header.required) throw new Error(`${where}: required header ${name} missing`)
      continue
    }
    const validate = validatorFor(`${operation.operationId}:${status}:header:${name}`, header.schema)
    if (!validate(value)) throw new Error(`${where}: header ${name} ${ajv.errorsText(validate.errors)}`)
  }
  const content = response.content
  if (!content) {
    if (answer.text !== '') throw new Error(`${where}: ${operation.operationId} documents no body, but one came`)
    return
  }
  const type = (answer.headers.get('content-type') ?? '').split(';')[0]!.trim()
  const media = content[type]
  if (!media) throw new Error(`${where}: content type ${type || '(none)'} not documented (documented: ${Object.keys(content).join(', ')})`)
  if (!type.endsWith('json')) return
  const validate = validatorFor(`${operation.operationId}:${status}:${type}`, media.schema)
  if (!validate(JSON.parse(answer.text))) throw new Error(`${where}: body does not match the document: ${ajv.errorsText(validate.errors)}`)
}

/** `fetch` for the API: every answer is checked against the document before the test sees it. */
export async function checkedFetch(url: string, init: RequestInit = {}): Promise<Response> {
  const response = await fetch(url, init)
  const text = await response.clone().text()
  assertDocumentedAnswer({ method: init.method ?? 'GET', url }, { status: response.status, headers: response.headers, text })
  return response
}
