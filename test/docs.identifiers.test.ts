import { readdirSync, readFileSync } from 'node:fs'
import { expect } from 'chai'
import { envSchema } from '../src/providers/config.ts'
import { codeSpans, namesInSpan, readCodeIndex, unknownNames, type CodeIndex, type Finding } from './support/doc-names.ts'

const PAGES = ['README.md', ...readdirSync('docs').flatMap((name) => (name.endsWith('.md') ? [`docs/${name}`] : []))]

/** Names the pages may use that no code of ours declares: each is another system's, and says whose. */
const EXTERNAL = new Map<string, string>([
  ['fromKnex', "pg-boss's adapter that sends a job inside a knex transaction"],
  ['JobAttempt', "pg-boss's settlement argument ({id, retryCount})"],
  ['SendEmail', "AWS SES v2's API action"],
  ['InternalFailure', "AWS SES's error type for a 500 (the fault table's SES column)"],
  ['ServiceUnavailable', "AWS SES's error type for a 503 (the fault table's SES column, and a providerCode in the logs)"],
  ['TransientCommunicationFailure', "an SES DeliveryDelay delayType, stored as the event's subtype"],
  ['AWS_ACCESS_KEY_ID', "the AWS SDK's credential chain reads it"],
  ['X509Certificate', "node:crypto's class that checks SNS's signing certificate"],
  ['AbortSignal', "Node's global (AbortSignal.timeout bounds a send)"],
  ['headersTimeout', "Node's http.Server setting"],
  ['requestTimeout', "Node's http.Server setting"],
  ['EBADENGINE', "npm's warning for an engines mismatch"],
  ['ECONNECTION', "nodemailer's error code, logged as the SMTP providerCode"],
  ['validateRequest', "the twilio library's signature check, whose URL rules Sealpost follows"],
  ['WA131026', 'an example event subtype: WA and Meta’s error code 131026'],
  ['HttpOnly', 'a cookie attribute (RFC 6265)'],
  ['SameSite', 'a cookie attribute (RFC 6265bis)'],
  ['CREATEROLE', 'a PostgreSQL role attribute'],
  ['BYPASSRLS', 'a PostgreSQL role attribute'],
  ['LISTEN', 'a PostgreSQL command'],
  ['RETURNING', 'a PostgreSQL clause'],
  ['OTEL_EXPORTER_OTLP_HEADERS', "the OpenTelemetry SDK's setting"],
  ['OTEL_TRACES_SAMPLER', "the OpenTelemetry SDK's setting"],
  ['OTEL_TRACES_SAMPLER_ARG', "the OpenTelemetry SDK's setting"],
  ['API_EXTERNAL_URL', "Supabase Auth's (GoTrue's) setting"],
  ['GOTRUE_MAILER_OTP_EXP', "Supabase Auth's (GoTrue's) setting"],
  ['GOTRUE_SMS_OTP_EXP', "Supabase Auth's (GoTrue's) setting"],
  ['MAILER_URLPATHS_CONFIRMATION', "Supabase Auth's (GoTrue's) setting"],
  ['SMS_OTP_EXP', "Supabase Auth's config.toml setting"],
  ['buildGotrueEnv', "the Supabase CLI's function that sets Auth's environment"],
  ['verifyOtp', "supabase-js's call that checks a code"],
  ['WhatsApp', 'the brand, in the text of a log line'],
  ['ALICE_TOKEN', "a shell variable of getting-started.md's own walkthrough"],
])

let index: CodeIndex

const report = (findings: Finding[]) =>
  findings.map(({ page, line, kind, name, problem }) => `${page}:${line} ${kind} \`${name}\`: ${problem}`)

describe('names in README.md and docs/', () => {
  before(async () => {
    index = await readCodeIndex({ environment: Object.keys(envSchema.shape), allowed: EXTERNAL })
  })

  it('every path, symbol, constant, environment variable, SQL name, metric and npm script a page puts in backticks exists in the code', () => {
    const findings = PAGES.flatMap((page) => unknownNames(page, readFileSync(page, 'utf8'), index))
    expect(
      report(findings),
      'rename or drop each in its page; a name that is another system’s goes to EXTERNAL with its reason (test/docs.identifiers.test.ts)',
    ).to.deep.equal([])
  })

  it('the allow-list holds only names some page uses and that the code does not have itself', () => {
    const withoutList: CodeIndex = { ...index, allowed: new Map() }
    const needed = new Set(PAGES.flatMap((page) => unknownNames(page, readFileSync(page, 'utf8'), withoutList).map(({ name }) => name)))
    expect([...EXTERNAL.keys()].filter((name) => !needed.has(name))).to.deep.equal([])
  })
})

describe('the docs check', () => {
  before(async () => {
    index ??= await readCodeIndex({ environment: Object.keys(envSchema.shape), allowed: EXTERNAL })
  })

  // Three lines the guide carried after their names were gone (docs/architecture.md §2 and §6, performance.md).
  const STALE = [
    '| `publish-sql.ts` | the one-statement publication (`publishLeasedMessagesTx`, formerly `PUBLISH_SQL` in `record.ts`) |',
    '| The web may only insert fresh delivery jobs | … | `pgbossGrants`, `pgbossRowPolicies` in `src/db/release.ts`; `test/roles.pgboss-grants.test.ts` |',
    'it does for a `THROTTLED` pause (`pausedLocally`): once this worker records a `down` transition for',
  ].join('\n')

  it('catches PUBLISH_SQL named in record.ts, pgbossRowPolicies and pausedLocally, and accepts the rest of their lines', () => {
    const found = unknownNames('stale.md', STALE, index).map(({ line, name }) => `${line} ${name}`)
    expect(found).to.deep.equal(['1 PUBLISH_SQL', '2 pgbossRowPolicies', '3 pausedLocally'])
  })

  it('reads each kind of name out of a span, and leaves headers, prose, strings and placeholders alone', () => {
    const names = (span: string) => namesInSpan(span).map(({ kind, name }) => `${kind} ${name}`)
    expect(names('nextRetryAt(now, n, cappedRetryAfter(…), RETRY_SCHEDULE)')).to.deep.equal([
      'symbol nextRetryAt',
      'symbol cappedRetryAfter',
      'constant RETRY_SCHEDULE',
    ])
    expect(names('open()')).to.deep.equal(['symbol open'])
    expect(names('import()')).to.deep.equal([])
    expect(names('QUEUES')).to.deep.equal(['constant QUEUES'])
    expect(names('npm run docs:faults')).to.deep.equal(['npm script docs:faults'])
    expect(names('node --import ./src/bin/tracing.ts src/bin/web.ts')).to.deep.equal(['path src/bin/tracing.ts', 'path src/bin/web.ts'])
    expect(names('templates/<locale>/<purpose>.*.hbs')).to.deep.equal(['path templates/<locale>/<purpose>.*.hbs'])
    expect(names('outbox.dead_letter_messages(…, p_now)')).to.deep.equal(['sql outbox.dead_letter_messages'])
    expect(names('LEASE_SECONDS ≥ 2 × SEND_TIMEOUT_MS + 5 s')).to.deep.equal(['constant LEASE_SECONDS', 'constant SEND_TIMEOUT_MS'])
    expect(names('GET')).to.deep.equal(['constant GET'])
    for (const span of [
      'X-RateLimit-Reset',
      'Retry-After: 30',
      'boss.send',
      'test/outbox.invariants.test.ts',
      '"messageId"',
      'v2.<keyId>.…',
      'GET /healthz',
    ])
      expect(
        names(span).filter((name) => !name.startsWith('path')),
        span,
      ).to.deep.equal([])
  })

  it('judges names against the repository: placeholders match a folder; a missing file, SQL function, script, variable or metric is reported', () => {
    const page = [
      '`src/providers/<name>/faults.ts` and `jobs/` exist; `src/outbox/crash-loop-sql.ts` does not.',
      '`outbox.dead_letter_messages` is a function; `outbox.no_such_function` is not; `npm run no-such-script`.',
      '`SEND_TIMEOUT_MS` is a variable, `NO_SUCH_VARIABLE` is not; `HttpOnly` is allowed.',
      '`sealpost_outbox_messages{state}` and `sealpost_http_request_duration_seconds_bucket` are metrics, `sealpost_no_such_total` is not.',
    ].join('\n')
    expect(unknownNames('page.md', page, index).map(({ line, name }) => `${line} ${name}`)).to.deep.equal([
      '1 src/outbox/crash-loop-sql.ts',
      '2 outbox.no_such_function',
      '2 no-such-script',
      '3 NO_SUCH_VARIABLE',
      '4 sealpost_no_such_total',
    ])
  })

  it('skips fenced blocks and reports the line a span starts on', () => {
    const page = ['```sh', 'npm run not-a-script', '```', '', 'text', 'and `pausedLocally` here'].join('\n')
    expect(codeSpans(page)).to.deep.equal([{ text: 'pausedLocally', line: 6 }])
  })
})
