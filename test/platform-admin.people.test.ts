import { randomBytes } from 'node:crypto'
import { expect } from 'chai'
import type { Knex } from 'knex'
import { uuidv7 } from 'uuidv7'
import { parseIdentifier } from '../src/identity/identifiers.ts'
import { personBucketKeys } from '../src/identity/person-buckets.ts'
import { hashToken } from '../src/identity/secrets.ts'
import { destinationHmac } from '../src/outbox/destination.ts'
import { findPerson } from '../src/platform/people-sql.ts'
import { changeStaff } from '../src/platform/staff.ts'
import { eventually, inbox, uniqueEmail } from './support/helpers.ts'
import { useWebStack } from './support/web-stack.ts'

const password = 'correct horse battery'
const EXPORTS = '/platform-admin/people/exports'
const ERASURES = '/platform-admin/people/erasures'
const SCHEMAS = ['identity', 'organization', 'outbox', 'platform', 'pgboss']

/** Every row of every table in the Sealpost schemas (and pg-boss's) whose text holds one of the needles: `schema.table: needle`. */
async function findEverywhere(db: Knex, needles: readonly string[]): Promise<string[]> {
  const { rows: tables } = await db.raw<{ rows: { table_schema: string; table_name: string }[] }>(
    `SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema = ANY (?) AND table_type = 'BASE TABLE'`,
    [SCHEMAS],
  )
  const found: string[] = []
  for (const { table_schema: schema, table_name: table } of tables) {
    for (const needle of needles) {
      const { rows } = await db.raw<{ rows: { n: number }[] }>(
        `SELECT count(*)::int AS n FROM ONLY "${schema}"."${table}" t WHERE strpos(lower(t::text), lower(?)) > 0`,
        [needle],
      )
      if (rows[0]!.n > 0) found.push(`${schema}.${table}: ${needle}`)
    }
  }
  return found
}

describe('staff: export and erasure of one person (GDPR Art. 15 and 17)', function () {
  this.timeout(120_000)
  const f = useWebStack()

  const codeIn = (text: string | undefined) => /\b(\d{6})\b/.exec(text ?? '')![1]!
  async function emailCode(address: string, nth: number): Promise<string> {
    const mails = await eventually(async () => {
      const found = await inbox(f.stack.emulator.url, address)
      return found.length >= nth ? found : undefined
    }, `email #${nth} to ${address}`)
    return codeIn(mails[nth - 1]!.body.text)
  }
  /** An account made through the routes, as a person makes it: sign-up, confirmation, sign-in. */
  async function account(email: string, mailsBefore = 0) {
    expect((await f.stack.call('POST', '/sign-ups', { identifier: email, password })).status).to.equal(202)
    const confirmed = await f.stack.call('POST', '/sign-ups/confirmation', {
      identifier: email,
      code: await emailCode(email, mailsBefore + 1),
      password,
    })
    expect(confirmed.status).to.equal(201)
    const signedIn = await f.stack.call('POST', '/sessions', { identifier: email, password })
    expect(signedIn.status).to.equal(201)
    const token = String(signedIn.body!.token)
    const { identityId } = (await findPerson(f.db.owner, parseIdentifier(email)!))!
    return { email, token, identityId, auth: f.stack.bearer(token) }
  }
  /** A fresh step-up of the caller's session, as POST /step-ups/confirmation would have written it. */
  async function elevated(who: { token: string; identityId: string; auth: Record<string, string> }) {
    const session = await f.db
      .owner('identity.sessions')
      .where({ token_hash: hashToken(who.token) })
      .first('id')
    const token = randomBytes(32).toString('base64url')
    await f.db.owner('identity.elevations').insert({
      id: uuidv7(),
      identity_id: who.identityId,
      session_id: session.id,
      token_hash: hashToken(token),
      expires_at: new Date(Date.now() + 300_000),
    })
    return { ...who.auth, 'x-elevation-token': token }
  }
  async function staffMember() {
    const staff = await account(uniqueEmail('operator'))
    expect(await changeStaff(f.db.owner, 'grant', parseIdentifier(staff.email)!, 'test', new Date())).to.equal('granted')
    return staff
  }

  it('erases a person in one transaction: afterwards no table of any schema holds their id, address or keyed hashes', async () => {
    const staff = await staffMember()
    const person = await account(uniqueEmail('erasable'))
    // Their own organization, an invitation to another one, a password recovery, a suppression, a past staff grant.
    const own = await f.stack.call('POST', '/organizations', { name: 'Erasable Things' }, person.auth)
    expect(own.status).to.equal(201)
    const inviter = await account(uniqueEmail('inviter'))
    const other = await f.stack.call('POST', '/organizations', { name: 'Other Things' }, inviter.auth)
    expect(
      (await f.stack.call('POST', `/organizations/${String(other.body!.id)}/invitations`, { email: person.email }, inviter.auth)).status,
    ).to.equal(202)
    expect((await f.stack.call('POST', '/password-recoveries', { identifier: person.email })).status).to.equal(202)
    await eventually(
      async () => ((await inbox(f.stack.emulator.url, person.email)).length >= 3 ? true : undefined),
      'the invitation and the recovery code',
    )
    const hmac = destinationHmac(f.keys.codeHashKey, 'email', person.email)
    await f.db.owner('outbox.suppressed_destinations').insert({
      id: uuidv7(),
      destination_hmac: hmac,
      channel: 'email',
      masked_destination: 'e•••e@e•••.com',
      reason: 'complaint',
      since: new Date(),
    })
    expect(await changeStaff(f.db.owner, 'grant', parseIdentifier(person.email)!, 'test', new Date())).to.equal('granted')
    expect(await changeStaff(f.db.owner, 'revoke', parseIdentifier(person.email)!, 'test', new Date())).to.equal('revoked')

    const before = (await findPerson(f.db.owner, parseIdentifier(person.email)!))!
    const messageIds = (
      await f.db.owner('outbox.security_outbox_messages').where({ destination: person.email }).select<{ id: string }[]>('id')
    ).map((row) => row.id)
    expect(messageIds).to.have.length.of.at.least(3)
    const needles = [
      person.identityId,
      person.email,
      ...before.identifiers.map((identifier) => identifier.id),
      ...before.deviceIds,
      ...messageIds,
      hmac.toString('hex'),
      hashToken(person.token).toString('hex'),
      ...personBucketKeys(f.keys, before).map((key) => key.toString('hex')),
    ]
    const spentBuckets = await f.db.owner('platform.rate_limit_hits').whereIn('bucket_key', personBucketKeys(f.keys, before))
    expect(spentBuckets.length, 'the person spent budgets the erasure must find').to.be.greaterThan(0)
    // The scan sees them before: ids, addresses, HMACs and bucket keys, in the tables and in pg-boss's jobs.
    const seen = new Set((await findEverywhere(f.db.owner, needles)).map((hit) => hit.split(':')[0]!))
    for (const table of ['identity.identities', 'identity.sessions', 'outbox.suppressed_destinations', 'platform.rate_limit_hits'])
      expect(seen, table).to.include(table)
    expect(
      [...seen].some((table) => table.startsWith('pgboss.')),
      'a pg-boss job of their messages',
    ).to.equal(true)

    const erased = await f.stack.call('POST', ERASURES, { identifier: person.email }, await elevated(staff))
    expect(erased.status).to.equal(200)
    const tombstoneId = String(erased.body!.tombstoneId)
    expect(erased.body!.erased).to.include({ identifiers: 1, memberships: 1, invitations: 1, suppressions: 1 })

    expect(await findEverywhere(f.db.owner, needles)).to.deep.equal([])
    // What others' records need is kept under the tombstone: the organization it made, the audit trail.
    expect(await f.db.owner('organization.organizations').where({ id: own.body!.id }).first()).to.include({ created_by: tombstoneId })
    const trail = await f.db.owner('platform.audit_records').where({ subject: tombstoneId }).orderBy('at').select('action', 'actor')
    expect(trail.map((row) => row.action)).to.deep.equal(['staff.grant', 'staff.revoke', 'identity.erased'])
    expect(trail.at(-1)!.actor).to.equal(staff.identityId)
    // The old session is dead; the address can sign up afresh.
    expect((await f.stack.call('GET', '/sessions', undefined, person.auth)).status).to.equal(401)
    const again = await account(person.email, 3)
    expect(again.identityId).to.not.equal(person.identityId)
  })

  it('exports what is held about a person, every section, with no code, token, hash or envelope', async () => {
    const staff = await staffMember()
    const person = await account(uniqueEmail('exported'))
    const code = await emailCode(person.email, 1)
    const exported = await f.stack.call('POST', EXPORTS, { identifier: person.email }, await elevated(staff))
    expect(exported.status).to.equal(200)
    const body = exported.body!
    expect(body).to.have.keys([
      'identity',
      'identifiers',
      'password',
      'sessions',
      'devices',
      'challenges',
      'messages',
      'suppressions',
      'memberships',
      'invitations',
      'staff',
      'auditRecords',
    ])
    expect(body.identity).to.include({ id: person.identityId, status: 'active' })
    expect(body.identifiers).to.deep.include.members([
      {
        kind: 'email',
        value: person.email,
        verifiedAt: (body.identifiers as { verifiedAt: string }[])[0]!.verifiedAt,
        createdAt: (body.identifiers as { createdAt: string }[])[0]!.createdAt,
      },
    ])
    expect(body.password).to.include({ set: true })
    expect(body.messages).to.have.length(1)
    const text = JSON.stringify(body)
    const passwordHash = (await f.db.owner('identity.password_credentials').where({ identity_id: person.identityId }).first()).password_hash
    for (const secret of [code, person.token, hashToken(person.token).toString('hex'), passwordHash, '$argon2'])
      expect(text, 'a secret in the export').to.not.include(secret)
    expect(text).to.not.match(/"v[12]\.[A-Za-z0-9_-]+\./)
    expect(text).to.not.match(/\\\\x[0-9a-f]{64}/)
    const audit = await f.db.owner('platform.audit_records').where({ action: 'identity.exported', subject: person.identityId }).first()
    expect(audit).to.include({ actor: staff.identityId })
  })

  it('refuses without a session, to non-staff, to revoked staff, without a step-up, and staff erasing themselves; nothing is erased', async () => {
    const staff = await staffMember()
    const person = await account(uniqueEmail('kept'))
    const stranger = await account(uniqueEmail('stranger'))
    const revoked = await staffMember()
    expect(await changeStaff(f.db.owner, 'revoke', parseIdentifier(revoked.email)!, 'test', new Date())).to.equal('revoked')
    const body = { identifier: person.email }
    for (const path of [EXPORTS, ERASURES]) {
      expect((await f.stack.call('POST', path, body)).status, `${path} without a session`).to.equal(401)
      expect((await f.stack.call('POST', path, body, await elevated(stranger))).body?.code, `${path} by a stranger`).to.equal('not_staff')
      expect((await f.stack.call('POST', path, body, await elevated(revoked))).body?.code, `${path} by revoked staff`).to.equal('not_staff')
      expect((await f.stack.call('POST', path, body, staff.auth)).status, `${path} without a step-up`).to.equal(403)
      expect((await f.stack.call('POST', path, { identifier: 'not an address' }, await elevated(staff))).body?.code).to.equal(
        'invalid_identifier',
      )
      expect((await f.stack.call('POST', path, { identifier: uniqueEmail('nobody') }, await elevated(staff))).body?.code).to.equal(
        'person_not_found',
      )
    }
    expect((await f.stack.call('POST', ERASURES, { identifier: staff.email }, await elevated(staff))).body?.code).to.equal('own_identity')
    expect(await findPerson(f.db.owner, parseIdentifier(person.email)!)).to.not.equal(undefined)
    expect(await findPerson(f.db.owner, parseIdentifier(staff.email)!)).to.not.equal(undefined)
    expect(
      await f.db
        .owner('platform.audit_records')
        .whereIn('action', ['identity.erased', 'identity.exported'])
        .where({ actor: revoked.identityId }),
    ).to.have.length(0)
  })

  it("an unconfirmed claim on someone else's address pulls none of their messages into the claimant's export or erasure", async () => {
    const staff = await staffMember()
    const alice = await account(uniqueEmail('alice'))
    const mallory = await account(uniqueEmail('mallory'))
    // Mallory claims Alice's verified address as a sign-in method of her own and never confirms it.
    expect((await f.stack.call('POST', '/sign-in-methods', { identifier: alice.email }, await elevated(mallory))).status).to.equal(202)
    expect((await f.stack.call('POST', '/password-recoveries', { identifier: alice.email })).status).to.equal(202)
    const alicesOwn = () =>
      f.db.owner('outbox.security_outbox_messages').where({ destination: alice.email }).whereIn('purpose', ['sign_up', 'password_recovery'])
    const before = (await alicesOwn()).length
    expect(before, "Alice's sign-up and recovery messages").to.equal(2)

    const exported = await f.stack.call('POST', EXPORTS, { identifier: mallory.email }, await elevated(staff))
    expect(exported.status).to.equal(200)
    const purposes = (exported.body!.messages as { purpose: string }[]).map((message) => message.purpose)
    expect(purposes, "Mallory's export").to.not.include.members(['password_recovery'])
    expect(
      purposes.filter((purpose) => purpose === 'sign_up'),
      "only Mallory's own sign-up",
    ).to.have.length(1)

    expect((await f.stack.call('POST', ERASURES, { identifier: mallory.email }, await elevated(staff))).status).to.equal(200)
    expect((await alicesOwn()).length, "Alice's messages after Mallory's erasure").to.equal(before)
    expect((await findPerson(f.db.owner, parseIdentifier(alice.email)!))?.identityId).to.equal(alice.identityId)
  })

  it('refuses to erase another staff member (the owner does, by npm run people) or the only admin of an organization with other members', async () => {
    const staff = await staffMember()
    const colleague = await staffMember()
    expect((await f.stack.call('POST', ERASURES, { identifier: colleague.email }, await elevated(staff))).body?.code).to.equal(
      'staff_member',
    )
    const admin = await account(uniqueEmail('admin'))
    const member = await account(uniqueEmail('member'))
    const organization = await f.stack.call('POST', '/organizations', { name: 'Kept Together' }, admin.auth)
    expect(organization.status).to.equal(201)
    await f.db
      .owner('organization.memberships')
      .insert({ organization_id: organization.body!.id, identity_id: member.identityId, role: 'member' })
    expect((await f.stack.call('POST', ERASURES, { identifier: admin.email }, await elevated(staff))).body?.code).to.equal('sole_admin')
    expect(await findPerson(f.db.owner, parseIdentifier(colleague.email)!)).to.not.equal(undefined)
    expect(await findPerson(f.db.owner, parseIdentifier(admin.email)!)).to.not.equal(undefined)
    // With a second admin, the first may go.
    await f.db.owner('organization.memberships').where({ identity_id: member.identityId }).update({ role: 'admin' })
    expect((await f.stack.call('POST', ERASURES, { identifier: admin.email }, await elevated(staff))).status).to.equal(200)
  })
})
