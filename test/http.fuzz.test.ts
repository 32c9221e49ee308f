import { expect } from 'chai'
import fc from 'fast-check'
import { openApiDocument } from '../src/http/openapi.ts'
import { assertDocumentedAnswer } from './support/api-check.ts'
import { createElevatedSession, createVerifiedIdentity, uniqueEmail } from './support/helpers.ts'
import { sendBytes, sendRaw, type RawAnswer } from './support/raw-http.ts'
import { hostileBody, hostileString, validFor, type Hints, type Schema } from './support/schema-arbitrary.ts'
import { useWebStack } from './support/web-stack.ts'

/*
 * The API fuzzed against its own document: every operation of the served /openapi.json,
 * as a stranger, a signed-in caller and staff with a fresh elevation, with inputs valid by the
 * schemas and hostile ones. In CI a fixed seed and a bounded number of cases; a long run:
 *   FUZZ_RUNS=20000 npx mocha test/http.fuzz.test.ts     (FUZZ_SEED=<n> for another seed)
 * A failure prints the request as curl and how to replay it (FUZZ_SEED, FUZZ_PATH and the operation's name).
 */
const TOTAL_RUNS = Number(process.env.FUZZ_RUNS ?? 1_500)
const SEED = Number(process.env.FUZZ_SEED ?? 20_261_202)
const WEBHOOK_SECRET = 'fuzz-wasender-webhook-secret'
const METRICS_TOKEN = 'fuzz-metrics-token-never-echoed'

type Parameter = { in: 'path' | 'query' | 'header'; name: string; required?: boolean; schema: Schema }
type Operation = {
  operationId: string
  parameters?: Parameter[]
  requestBody?: { content: Record<string, { schema: Schema }> }
  security?: Record<string, string[]>[]
}
type Document = { paths: Record<string, Record<string, Operation>>; components: { schemas: Record<string, Schema> } }
type Caller = 'stranger' | 'signed-in' | 'staff'

const listed = (doc: Document) =>
  Object.entries(doc.paths).flatMap(([template, item]) =>
    Object.entries(item).map(([method, operation]) => ({ method: method.toUpperCase(), template, operation })),
  )
const operations = listed(openApiDocument() as unknown as Document)
const runsPerOperation = Math.max(1, Math.ceil(TOTAL_RUNS / operations.length))

const hints: Hints = (name) => {
  if (name === 'identifier')
    return fc.oneof(
      fc.nat({ max: 99_999 }).map((n) => `fuzz-${n}@example.com`),
      fc.nat({ max: 99_999_999 }).map((n) => `+54911${String(n).padStart(8, '0')}`),
    )
  if (name === 'password' || name === 'newPassword') return fc.string({ minLength: 12, maxLength: 40 })
  return undefined
}

/** Bytes Node's own client refuses to write; each goes out on a raw connection. */
const GARBLED_HEADER_LINES = [
  'X-A: a\u0000b',
  'X A: b',
  'X-Long: ' + 'a'.repeat(17_000),
  'Ｘ-Wide: b',
  'Authorization: Bearer \u0001\u0002',
  'Content-Length: 1\r\nContent-Length: 2',
  'Transfer-Encoding: chunked, identity',
  ': empty-name',
]
const BROKEN_PERCENT = ['%', '%ZZ', '%C0%AF', '%ED%A0%80', '%E0%A4%A', '%2e%2e', '%00']

/** One of the keys, each as often as its weight. */
const weighted = <K extends string>(weights: Record<K, number>) =>
  fc.oneof(...(Object.entries(weights) as [K, number][]).map(([key, weight]) => ({ weight, arbitrary: fc.constant(key) })))

/** In about one case of six (fc.option's `freq` weighs the other way: its nil is the rare one). */
const rarely = <T>(arbitrary: fc.Arbitrary<T>) => fc.oneof({ weight: 5, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary })

function encodeSegment(value: string): string {
  try {
    return encodeURIComponent(value)
  } catch {
    return '%ED%A0%80' // a lone surrogate, as its UTF-8 bytes would be written
  }
}

/** One request's choices; the caller's credentials are filled in when it runs (fresh for every case). */
function requestsFor(doc: Document, template: string, operation: Operation) {
  const parameters = operation.parameters ?? []
  const segment = (schema: Schema) =>
    fc.oneof(
      { weight: 3, arbitrary: fc.uuid().map(encodeSegment) },
      { weight: 1, arbitrary: validFor(schema, doc.components.schemas).map((value) => encodeSegment(String(value))) },
      { weight: 2, arbitrary: hostileString.map(encodeSegment) },
      { weight: 1, arbitrary: fc.constantFrom(...BROKEN_PERCENT, '１２３４') },
    )
  const path = parameters
    .filter((parameter) => parameter.in === 'path')
    .reduce<fc.Arbitrary<string>>(
      (so, parameter) => fc.tuple(so, segment(parameter.schema)).map(([done, value]) => done.replace(`{${parameter.name}}`, value)),
      fc.constant(template),
    )
  const queryPairs = parameters
    .filter((parameter) => parameter.in === 'query')
    .map((parameter) =>
      fc.option(
        fc
          .oneof(
            { weight: 3, arbitrary: validFor(parameter.schema, doc.components.schemas).map(String) },
            { weight: 1, arbitrary: hostileString },
          )
          .map((value) => `${parameter.name}=${encodeSegment(value)}`),
        { nil: undefined },
      ),
    )
  const query = fc
    .tuple(fc.tuple(...queryPairs), fc.option(fc.constantFrom('limit=1&limit=2', 'x=1', '__proto__[a]=1', 'after=%ZZ'), { nil: undefined }))
    .map(([pairs, extra]) => [...pairs, extra].filter((pair) => pair !== undefined).join('&'))
  const idempotency = parameters.find((parameter) => parameter.name === 'Idempotency-Key')
  const media = Object.entries(operation.requestBody?.content ?? {})[0]
  const body = media ? hostileBody(validFor(media[1].schema, doc.components.schemas, hints)) : fc.constant(undefined)
  return fc.record({
    caller: fc.constantFrom<Caller>('stranger', 'signed-in', 'staff'),
    path,
    query,
    body,
    contentType: fc.option(
      fc.oneof(
        { weight: 6, arbitrary: fc.constant(media?.[0] ?? 'application/json') },
        {
          weight: 1,
          arbitrary: fc.constantFrom('application/json', 'text/plain', 'application/json; charset=utf-16', 'multipart/form-data'),
        },
      ),
      { nil: undefined, freq: 8 },
    ),
    contentEncoding: rarely(fc.constantFrom('gzip', 'deflate', 'br', 'identity', 'compress', 'gzip, br')),
    authorization: weighted({ 'as-is': 6, 'lower-case': 2, none: 1, garbled: 1, basic: 1 }),
    elevation: weighted({ 'as-is': 6, none: 1, garbled: 1 }),
    idempotencyKey: idempotency
      ? fc.option(fc.oneof(validFor(idempotency.schema, doc.components.schemas).map(String), hostileString), { nil: undefined, freq: 5 })
      : fc.constant(undefined),
    signature: fc.constantFrom(WEBHOOK_SECRET, WEBHOOK_SECRET, 'wrong', undefined),
    requestId: rarely(hostileString),
    acceptLanguage: rarely(fc.oneof(fc.constantFrom('es', 'pt-BR;q=0.9, *', 'xx;q=abc'), hostileString)),
    garbled: rarely(fc.constantFrom(...GARBLED_HEADER_LINES)),
  })
}
type Case = ReturnType<typeof requestsFor> extends fc.Arbitrary<infer T> ? T : never

/** Node's client writes only header values of these bytes; anything else goes out raw. */
const HEADER_SAFE = /^[\t\x20-\x7e\x80-\xff]*$/
const PATH_SAFE = /^[\x21-\x7e]*$/

function curl(
  url: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body: string | Buffer | undefined,
  garbled?: string,
) {
  const quote = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`
  const lines = [`curl -sS -X ${method} ${quote(url + path)}`, ...Object.entries(headers).map(([k, v]) => `-H ${quote(`${k}: ${v}`)}`)]
  if (garbled) lines.push(`# and the raw header line ${JSON.stringify(garbled)} (send with nc)`)
  if (body !== undefined)
    lines.push(
      `--data-binary ${Buffer.isBuffer(body) ? `$'${[...body].map((b) => `\\x${b.toString(16).padStart(2, '0')}`).join('')}'` : quote(body)}`,
    )
  return lines.join(' \\\n  ')
}

describe('the API fuzzed against its own OpenAPI document', function () {
  // A long run (FUZZ_RUNS) takes as long as it takes.
  this.timeout(process.env.FUZZ_RUNS ? 0 : 120_000)
  const f = useWebStack({ worker: false, metricsToken: METRICS_TOKEN, webhooks: { WASENDER_WEBHOOK_SECRET: WEBHOOK_SECRET } })
  let served: Document

  before(async () => {
    served = (await f.stack.call('GET', '/openapi.json')).body as unknown as Document
  })

  async function credentialsOf(caller: Caller): Promise<Record<string, string>> {
    if (caller === 'stranger') return {}
    const { identityId } = await createVerifiedIdentity(f.db.owner, uniqueEmail(caller))
    if (caller === 'staff') await f.db.owner('platform.staff_members').insert({ identity_id: identityId })
    return await createElevatedSession(f.db.owner, identityId)
  }

  function headersOf(input: Case, credentials: Record<string, string>, hasBody: boolean): Record<string, string> {
    const headers: Record<string, string> = {}
    const token = credentials.authorization?.split(' ')[1]
    if (input.authorization === 'as-is' && token) headers.authorization = `Bearer ${token}`
    if (input.authorization === 'lower-case' && token) headers.authorization = `bearer ${token}`
    if (input.authorization === 'garbled') headers.authorization = `Bearer ${token ?? 'A'.repeat(43)}x`
    if (input.authorization === 'basic') headers.authorization = 'Basic YWRtaW46YWRtaW4='
    const elevation = credentials['x-elevation-token']
    if (input.elevation === 'as-is' && elevation) headers['x-elevation-token'] = elevation
    if (input.elevation === 'garbled') headers['x-elevation-token'] = `${elevation ?? 'forged'}x`
    if (hasBody && input.contentType !== undefined) headers['content-type'] = input.contentType
    if (input.contentEncoding !== undefined) headers['content-encoding'] = input.contentEncoding
    if (input.idempotencyKey !== undefined) headers['idempotency-key'] = input.idempotencyKey
    if (input.signature !== undefined) headers['x-webhook-signature'] = input.signature
    if (input.requestId !== undefined) headers['x-request-id'] = input.requestId
    if (input.acceptLanguage !== undefined) headers['accept-language'] = input.acceptLanguage
    return headers
  }

  async function send(method: string, path: string, headers: Record<string, string>, body: string | Buffer | undefined, garbled?: string) {
    if (!garbled && PATH_SAFE.test(path) && Object.values(headers).every((value) => HEADER_SAFE.test(value)))
      return await sendRaw(f.stack.web.url, { method, path, headers, body })
    const bytes = body === undefined ? Buffer.alloc(0) : Buffer.from(body)
    const lines = [
      `${method} ${path} HTTP/1.1`,
      'Host: 127.0.0.1',
      ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
      ...(garbled ? [garbled] : []),
      `Content-Length: ${bytes.length}`,
      'Connection: close',
    ]
    return await sendBytes(f.stack.web.url, Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`), bytes]))
  }

  /** Everything a case sent that must never come back: passwords, codes, tokens, the webhook secret. */
  function secretsOf(headers: Record<string, string>, body: string | Buffer | undefined): string[] {
    const secrets = [WEBHOOK_SECRET, METRICS_TOKEN, headers.authorization?.split(' ')[1], headers['x-elevation-token']]
    try {
      const parsed = JSON.parse(String(body)) as Record<string, unknown>
      for (const key of ['password', 'newPassword', 'code', 'token'])
        secrets.push(typeof parsed?.[key] === 'string' ? parsed[key] : undefined)
    } catch {
      // Not JSON: nothing named a secret in it.
    }
    // Short values (a 6-digit code) could appear by chance in an id or a date; they are not checked.
    return secrets.filter((secret): secret is string => typeof secret === 'string' && secret.trim().length >= 8)
  }

  function check(method: string, template: string, path: string, answer: RawAnswer, secrets: string[]) {
    expect(answer.status, 'a 5xx').to.be.below(500)
    assertDocumentedAnswer({ method, url: path }, answer)
    if (answer.status >= 400) expect(answer.headers.get('x-request-id'), 'a problem names its request').to.be.a('string')
    const said = `${[...answer.headers].map(([k, v]) => `${k}: ${v}`).join('\n')}\n${answer.text}`
    if (template !== '/openapi.json')
      for (const secret of secrets) expect(said.includes(secret), `echoed a secret sent: ${secret}`).to.equal(false)
  }

  it('serves the document the cases are made from, and every operation of it is fuzzed below', () => {
    expect(listed(served).map(({ method, template }) => `${method} ${template}`)).to.deep.equal(
      operations.map(({ method, template }) => `${method} ${template}`),
    )
  })

  for (const [index, { method, template }] of operations.entries()) {
    it(`${method} ${template}: no 5xx, only documented statuses and bodies, no secret echoed, still alive`, async () => {
      const { operation } = listed(served).find((entry) => entry.method === method && entry.template === template)!
      const property = fc.asyncProperty(requestsFor(served, template, operation), async (input) => {
        const credentials = await credentialsOf(input.caller)
        const headers = headersOf(input, credentials, input.body !== undefined)
        const path = input.query ? `${input.path}?${input.query}` : input.path
        const answer = await send(method, path, headers, input.body, input.garbled)
        try {
          check(method, template, path, answer, secretsOf(headers, input.body))
          expect(
            (await sendRaw(f.stack.web.url, { method: 'GET', path: '/healthz' })).status,
            'the server still answers /healthz',
          ).to.equal(200)
        } catch (error) {
          const request = curl(f.stack.web.url, method, path, headers, input.body, input.garbled)
          throw new Error(
            `${(error as Error).message}\nas ${input.caller}, answered ${answer.status} ${answer.text.slice(0, 300)}\n${request}\n` +
              `replay: FUZZ_SEED=${SEED} FUZZ_PATH=<the path fast-check prints> npx mocha test/http.fuzz.test.ts -g '${method} ${template}:'`,
            { cause: error },
          )
        }
      })
      await fc.assert(property, {
        seed: SEED + index,
        numRuns: runsPerOperation,
        path: process.env.FUZZ_PATH,
        // Shrinking re-sends many requests against a database that has moved on; the first failure is reported as found.
        endOnFailure: !process.env.FUZZ_SHRINK,
      })
    })
  }
})
