import { expect } from 'chai'
import { parseIdentifier } from '../../src/identity/identifiers.ts'
import { changeStaff } from '../../src/platform/staff.ts'
import { createElevatedSession, createVerifiedIdentity, uniqueEmail } from './helpers.ts'
import type { useWebStack } from './web-stack.ts'

/** A key's scope and limits as `POST /platform-admin/api-keys` takes them. */
export type KeyRequest = {
  name?: string
  purposes?: string[]
  channels?: string[]
  requestsPerMinute?: number
  perDestinationPerHour?: number
  perDestinationPerDay?: number
  sendsPerHour?: number
  destinationsPerHour?: number
  linkOrigins?: string[]
}

/** Staff members and API keys made through the real routes, and courier calls with a key. */
export function courierKit(f: ReturnType<typeof useWebStack>) {
  /** A stepped-up staff member's headers (`Authorization`, `X-Elevation-Token`) and identity. */
  async function staff() {
    const email = uniqueEmail('staff')
    const { identityId } = await createVerifiedIdentity(f.db.owner, email)
    expect(await changeStaff(f.db.owner, 'grant', parseIdentifier(email)!, 'test', new Date())).to.equal('granted')
    return { identityId, headers: await createElevatedSession(f.db.owner, identityId) }
  }
  /** A new key through `POST /platform-admin/api-keys`: its id and the clear key. */
  async function apiKey(request: KeyRequest = {}, by?: Awaited<ReturnType<typeof staff>>) {
    const member = by ?? (await staff())
    const created = await f.stack.call(
      'POST',
      '/platform-admin/api-keys',
      {
        name: 'test app',
        purposes: ['verification_code', 'magic_link', 'sign_up'],
        channels: ['email', 'whatsapp'],
        linkOrigins: ['https://app.example.test'],
        ...request,
      },
      member.headers,
    )
    expect(created.status, JSON.stringify(created.body)).to.equal(201)
    return { id: String(created.body!.id), key: String(created.body!.key) }
  }
  /** `POST /v1/messages` with a key and an idempotency key. */
  async function send(key: string, body: unknown, idempotencyKey: string = crypto.randomUUID()) {
    return await f.stack.call('POST', '/v1/messages', body, { authorization: `Bearer ${key}`, 'idempotency-key': idempotencyKey })
  }
  return { staff, apiKey, send }
}
