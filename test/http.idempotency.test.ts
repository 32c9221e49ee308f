import { randomBytes } from 'node:crypto'
import { expect } from 'chai'
import { openApiDocument } from '../src/http/openapi.ts'
import { requestDigest } from '../src/platform/idempotency.ts'
import { courierKit } from './support/courier-kit.ts'
import { insertFailedDeadLetter } from './support/dead-letters.ts'
import { uniqueEmail } from './support/helpers.ts'
import { useWebStack } from './support/web-stack.ts'

type Answer = Awaited<ReturnType<ReturnType<typeof useWebStack>['stack']['call']>>
/** One idempotent route: a call under a key (none: `undefined`) for one of two different requests. */
type IdempotentRoute = { operationId: string; call: (key: string | undefined, request: 'first' | 'other') => Promise<Answer> }

type Operation = {
  operationId: string
  parameters?: { name: string; in: string }[]
  responses: Record<
    string,
    { headers?: Record<string, unknown>; content?: Record<string, { schema: { allOf: { properties: { code: { enum: string[] } } }[] } }> }
  >
}

describe('one Idempotency-Key rule on every route that takes one', () => {
  const f = useWebStack({ worker: false })
  const kit = courierKit(f)

  /** The routes that take an Idempotency-Key, each set up with two requests that differ. */
  async function idempotentRoutes(): Promise<IdempotentRoute[]> {
    const { key: apiKey } = await kit.apiKey()
    const staff = await kit.staff()
    const destination = uniqueEmail('idempotent')
    const expiresAt = new Date(Date.now() + 600_000).toISOString()
    const message = (code: string) => ({ purpose: 'verification_code', channel: 'email', destination, secret: { code }, expiresAt })
    const deadLetters = {
      first: await insertFailedDeadLetter(f.db.owner, { destination: uniqueEmail('dead'), failures: ['UNAVAILABLE'] }),
      other: await insertFailedDeadLetter(f.db.owner, { destination: uniqueEmail('dead'), failures: ['UNAVAILABLE'] }),
    }
    const keyed = (headers: Record<string, string>, key: string | undefined) => (key ? { ...headers, 'idempotency-key': key } : headers)
    return [
      {
        operationId: 'sendCourierMessage',
        call: (key, request) =>
          f.stack.call(
            'POST',
            '/v1/messages',
            message(request === 'first' ? '111111' : '222222'),
            keyed({ authorization: `Bearer ${apiKey}` }, key),
          ),
      },
      {
        operationId: 'reissueDeadLetter',
        call: (key, request) =>
          f.stack.call(
            'POST',
            `/platform-admin/security-outbox/dead-letters/${deadLetters[request].messageId}/reissues`,
            undefined,
            keyed(staff.headers, key),
          ),
      },
      {
        operationId: 'redriveDeadLetters',
        call: (key, request) =>
          f.stack.call(
            'POST',
            '/platform-admin/security-outbox/dead-letters/redrives',
            { reason: 'worker_crash_loop', limit: request === 'first' ? 10 : 20 },
            keyed(staff.headers, key),
          ),
      },
    ]
  }

  it('gives the same answers about the key on every route, as the IETF draft assigns them: 400 without one, the first answer replayed for the same request, 422 for another', async () => {
    const seen: string[] = []
    for (const route of await idempotentRoutes()) {
      const key = `key-${randomBytes(6).toString('hex')}`
      const none = await route.call(undefined, 'first')
      const first = await route.call(key, 'first')
      const again = await route.call(key, 'first')
      const other = await route.call(key, 'other')
      expect(first.status, route.operationId).to.be.within(200, 299)
      expect(first.headers.get('idempotent-replayed'), route.operationId).to.equal(null)
      expect([again.status, again.body], `${route.operationId}: the replay`).to.deep.equal([first.status, first.body])
      expect(again.headers.get('idempotent-replayed'), route.operationId).to.equal('true')
      for (const refused of [none, other])
        expect(refused.headers.get('content-type'), route.operationId).to.match(/^application\/problem\+json/)
      const answers = { none: [none.status, none.body?.code], other: [other.status, other.body?.code] }
      expect(answers, route.operationId).to.deep.equal({ none: [400, 'idempotency_key_required'], other: [422, 'idempotency_key_reused'] })
      seen.push(JSON.stringify(answers))
    }
    expect(new Set(seen).size, 'one answer on every route').to.equal(1)
  })

  it('answers 409 idempotency_key_in_use while the request that took the key has not finished', async () => {
    const staff = await kit.staff()
    const dead = await insertFailedDeadLetter(f.db.owner, { destination: uniqueEmail('dead'), failures: ['UNAVAILABLE'] })
    // The key as a request in progress leaves it: taken for this very request, no answer stored yet.
    await f.db.owner('platform.idempotency_keys').insert({
      identity_id: staff.identityId,
      scope: 'reissue',
      key: 'in-progress',
      request_hash: requestDigest(`reissue:${dead.messageId}`),
      created_at: new Date(),
    })
    const answer = await f.stack.call('POST', `/platform-admin/security-outbox/dead-letters/${dead.messageId}/reissues`, undefined, {
      ...staff.headers,
      'idempotency-key': 'in-progress',
    })
    expect([answer.status, answer.body?.code]).to.deep.equal([409, 'idempotency_key_in_use'])
    expect(await f.db.owner('outbox.security_outbox_messages').where({ challenge_id: dead.challengeId })).to.have.length(1)
  })

  it('describes the key once in the API document: every operation that takes it lists the same three answers and the replay header', async () => {
    const doc = openApiDocument() as { paths: Record<string, Record<string, Operation>> }
    const operations = Object.values(doc.paths).flatMap((path) => Object.values(path))
    const idempotent = operations.filter((operation) => operation.parameters?.some((parameter) => parameter.name === 'Idempotency-Key'))
    expect(idempotent.map((operation) => operation.operationId)).to.have.members(
      (await idempotentRoutes()).map((route) => route.operationId),
    )
    for (const operation of idempotent) {
      const codes = (status: string) =>
        operation.responses[status]?.content?.['application/problem+json']?.schema.allOf[1]?.properties.code.enum ?? []
      expect(codes('400'), operation.operationId).to.include('idempotency_key_required')
      expect(codes('409'), operation.operationId).to.include('idempotency_key_in_use')
      expect(codes('422'), operation.operationId).to.include('idempotency_key_reused')
      const success = Object.entries(operation.responses).find(([status]) => status.startsWith('2'))![1]
      expect(success.headers, operation.operationId).to.have.property('Idempotent-Replayed')
      const refusedElsewhere = Object.entries(operation.responses)
        .filter(([status]) => !['400', '409', '422'].includes(status))
        .flatMap(([, response]) => response.content?.['application/problem+json']?.schema.allOf[1]?.properties.code.enum ?? [])
      expect(
        refusedElsewhere.filter((code) => code.startsWith('idempotency_key')),
        operation.operationId,
      ).to.deep.equal([])
    }
  })
})
