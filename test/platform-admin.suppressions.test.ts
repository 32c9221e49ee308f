import { randomBytes, randomUUID } from 'node:crypto'
import { expect } from 'chai'
import { uuidv7 } from 'uuidv7'
import { createKnex } from '../src/db/knex.ts'
import { parseIdentifier } from '../src/identity/identifiers.ts'
import { hashToken } from '../src/identity/secrets.ts'
import { changeStaff } from '../src/platform/staff.ts'
import { createVerifiedIdentity, uniqueEmail } from './support/helpers.ts'
import { useWebStack } from './support/web-stack.ts'

const BASE = '/platform-admin/suppressions'

describe('staff: the suppression list', () => {
  const f = useWebStack({ worker: false })

  /** A verified identity with a live session (as sign-in would have written it); staff when asked. */
  async function person(staff: boolean) {
    const email = uniqueEmail(staff ? 'staff' : 'person')
    const { identityId } = await createVerifiedIdentity(f.db.owner, email)
    const token = randomBytes(32).toString('base64url')
    const sessionId = uuidv7()
    await f.db
      .owner('identity.sessions')
      .insert({ id: sessionId, identity_id: identityId, token_hash: hashToken(token), expires_at: new Date(Date.now() + 3_600_000) })
    if (staff) expect(await changeStaff(f.db.owner, 'grant', parseIdentifier(email)!, 'test', new Date())).to.equal('granted')
    return { identityId, sessionId, token, auth: f.stack.bearer(token) }
  }
  async function elevate(who: { identityId: string; sessionId: string }) {
    const token = randomBytes(32).toString('base64url')
    await f.db.owner('identity.elevations').insert({
      id: uuidv7(),
      identity_id: who.identityId,
      session_id: who.sessionId,
      token_hash: hashToken(token),
      expires_at: new Date(Date.now() + 300_000),
    })
    return token
  }
  async function suppression(since: Date, reason = 'permanent_bounce') {
    const id = randomUUID()
    await f.db
      .owner('outbox.suppressed_destinations')
      .insert({ id, destination_hmac: randomBytes(32), channel: 'email', masked_destination: 'a•••e@e•••.com', reason, since })
    return id
  }

  it('answers anyone who is not staff 403 not_staff, before reading anything', async () => {
    const someone = await person(false)
    const id = await suppression(new Date())
    expect((await f.stack.call('GET', BASE, undefined, someone.auth)).body?.code).to.equal('not_staff')
    expect(
      (await f.stack.call('DELETE', `${BASE}/${id}`, undefined, { ...someone.auth, 'x-elevation-token': await elevate(someone) })).body
        ?.code,
    ).to.equal('not_staff')
    expect((await f.stack.call('GET', BASE)).status).to.equal(401)
    expect(await f.db.owner('outbox.suppressed_destinations').where({ id })).to.have.length(1)
  })

  it('lists suppressions masked, newest first, a keyset page at a time', async () => {
    const staff = await person(true)
    // Newer than any other test's rows, so they open the first page.
    const now = Date.now() + 86_400_000
    const ids = [
      await suppression(new Date(now - 3_000)),
      await suppression(new Date(now - 2_000), 'complaint'),
      await suppression(new Date(now - 1_000)),
    ]
    const first = await f.stack.call('GET', `${BASE}?limit=2`, undefined, staff.auth)
    expect(first.status).to.equal(200)
    const page = first.body as {
      items: { id: string; maskedDestination: string; reason: string }[]
      pageInfo: { hasNextPage: boolean; endCursor: string }
    }
    expect(page.items.map((item) => item.id)).to.deep.equal([ids[2], ids[1]])
    expect(page.items[1]).to.include({ maskedDestination: 'a•••e@e•••.com', reason: 'complaint' })
    expect(Object.keys(page.items[0]!)).to.have.members(['id', 'channel', 'maskedDestination', 'reason', 'since', 'messageId'])
    expect(page.pageInfo.hasNextPage).to.equal(true)
    const next = await f.stack.call('GET', `${BASE}?limit=2&after=${page.pageInfo.endCursor}`, undefined, staff.auth)
    expect((next.body as typeof page).items.map((item) => item.id)).to.include(ids[0])
    const bad = await f.stack.call('GET', `${BASE}?after=nonsense`, undefined, staff.auth)
    expect(bad.status).to.equal(400)
    expect(bad.body?.code).to.equal('invalid_cursor')
  })

  it('lifts one only with a fresh elevation, audited, and says 404 for one that is not there', async () => {
    const staff = await person(true)
    const id = await suppression(new Date())
    const refused = await f.stack.call('DELETE', `${BASE}/${id}`, undefined, staff.auth)
    expect(refused.status).to.equal(403)
    expect(refused.body?.code).to.equal('elevation_required')
    expect(await f.db.owner('outbox.suppressed_destinations').where({ id })).to.have.length(1)

    const elevation = await elevate(staff)
    expect((await f.stack.call('DELETE', `${BASE}/${id}`, undefined, { ...staff.auth, 'x-elevation-token': elevation })).status).to.equal(
      204,
    )
    expect(await f.db.owner('outbox.suppressed_destinations').where({ id })).to.have.length(0)
    const audit = await f.db.owner('platform.audit_records').where({ action: 'security_outbox.suppression_lifted', subject: id }).first()
    expect(audit).to.include({ actor: staff.identityId })
    expect(JSON.stringify(audit.details)).to.not.include('@')

    expect(
      (await f.stack.call('DELETE', `${BASE}/${id}`, undefined, { ...staff.auth, 'x-elevation-token': elevation })).body?.code,
    ).to.equal('suppression_not_found')
    expect(
      (await f.stack.call('DELETE', `${BASE}/not-a-uuid`, undefined, { ...staff.auth, 'x-elevation-token': elevation })).body?.code,
    ).to.equal('suppression_not_found')
  })

  it('the staff functions check the session themselves: the api role with a non-staff session is refused', async () => {
    const someone = await person(false)
    const id = await suppression(new Date())
    const api = createKnex(f.db.apiUrl, { applicationName: 'suppressions-api', max: 1 })
    try {
      const page = await api.raw('SELECT * FROM outbox.suppression_page(?, now(), 10, NULL, NULL)', [hashToken(someone.token)]).then(
        () => 'allowed',
        (error: { code?: string }) => error.code,
      )
      expect(page).to.equal('42501')
      const lift = await api.raw('SELECT outbox.lift_suppression(?, now(), ?)', [hashToken(someone.token), id]).then(
        () => 'allowed',
        (error: { code?: string }) => error.code,
      )
      expect(lift).to.equal('42501')
      const direct = await api.raw('SELECT destination_hmac FROM outbox.suppressed_destinations').then(
        () => 'allowed',
        (error: { code?: string }) => error.code,
      )
      expect(direct).to.equal('42501')
      const insert = await api
        .raw(`INSERT INTO outbox.security_outbox_delivery_events (message_id, event, occurred_at) VALUES ('${id}', 'delivered', now())`)
        .then(
          () => 'allowed',
          (error: { code?: string }) => error.code,
        )
      expect(insert, 'events only through the webhook function').to.equal('42501')
    } finally {
      await api.destroy()
    }
    expect(await f.db.owner('outbox.suppressed_destinations').where({ id })).to.have.length(1)
  })

  it('a disabled staff member, or a staff session revived by an old clock, can neither read nor lift a suppression (one staff check for every staff function)', async () => {
    const staff = await person(true)
    const id = await suppression(new Date())
    const api = createKnex(f.db.apiUrl, { applicationName: 'suppressions-api', max: 1 })
    const codeOf = (query: Promise<unknown>) =>
      query.then(
        () => 'allowed',
        (error: { code?: string }) => error.code,
      )
    try {
      // The session expired an hour ago; a caller naming a time before that must not bring it back.
      await f.db
        .owner('identity.sessions')
        .where({ id: staff.sessionId })
        .update({ expires_at: new Date(Date.now() - 3_600_000) })
      const longAgo = new Date(Date.now() - 7_200_000)
      expect(
        await codeOf(api.raw('SELECT * FROM outbox.suppression_page(?, ?, 10, NULL, NULL)', [hashToken(staff.token), longAgo])),
      ).to.equal('42501')
      // A live session of a staff member whose identity was disabled.
      await f.db
        .owner('identity.sessions')
        .where({ id: staff.sessionId })
        .update({ expires_at: new Date(Date.now() + 3_600_000) })
      await f.db.owner('identity.identities').where({ id: staff.identityId }).update({ status: 'disabled' })
      expect(await codeOf(api.raw('SELECT * FROM outbox.suppression_page(?, now(), 10, NULL, NULL)', [hashToken(staff.token)]))).to.equal(
        '42501',
      )
      expect(await codeOf(api.raw('SELECT outbox.lift_suppression(?, now(), ?)', [hashToken(staff.token), id]))).to.equal('42501')
    } finally {
      await api.destroy()
    }
    expect(await f.db.owner('outbox.suppressed_destinations').where({ id })).to.have.length(1)
  })
})
