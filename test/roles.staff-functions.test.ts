import { randomBytes } from 'node:crypto'
import { expect } from 'chai'
import type { Knex } from 'knex'
import { uuidv7 } from 'uuidv7'
import { createKnex } from '../src/db/knex.ts'
import { hashToken } from '../src/identity/secrets.ts'
import { createTestDatabase, type TestDatabase } from './support/database.ts'
import { createVerifiedIdentity, insertOpenMessage, uniqueEmail } from './support/helpers.ts'

/**
 * docs/architecture.md §6: the staff SECURITY DEFINER functions check a live staff session in
 * the database from the session token's SHA-256, so the api login itself — a compromised web
 * process — reads and reissues nothing without one. Every call here is raw SQL as the api login.
 */
const CALLS: [string, string][] = [
  ['the backlog', 'SELECT * FROM outbox.backlog_summary(?, now())'],
  ['a dead-letter page', 'SELECT * FROM outbox.dead_letter_page(?, now(), 50, NULL, NULL, NULL, NULL)'],
  ['a reissue candidate', `SELECT * FROM outbox.reissue_candidate(?, '${uuidv7()}', now())`],
  ["one message's history", `SELECT outbox.message_history(?, '${uuidv7()}')`],
  ['a suppression page', 'SELECT * FROM outbox.suppression_page(?, now(), 10, NULL, NULL)'],
  ['a suppression lift', `SELECT outbox.lift_suppression(?, now(), '${uuidv7()}')`],
  ['a search by destination hash', 'SELECT * FROM outbox.messages_by_destination(?, now(), ARRAY[]::bytea[], 10, NULL)'],
  ['the delivery-event counts', "SELECT * FROM outbox.delivery_event_counts(?, now(), now() - interval '1 day')"],
  ['the redrive candidates', "SELECT * FROM outbox.redrive_candidates(?, now(), 'retries_exhausted', 10, NULL)"],
  ["the channels' pauses", 'SELECT * FROM outbox.channel_pauses(?, now())'],
  ['the running pauses (per provider and per channel)', 'SELECT * FROM outbox.running_pauses(?, now())'],
  ['a pause lift', "SELECT * FROM outbox.lift_channel_pause(?, now(), 'email')"],
  ['an outage hold lift', "SELECT * FROM outbox.lift_provider_hold(?, now(), 'ses')"],
  ['an audit-record page', 'SELECT * FROM platform.audit_record_page(?, now(), 10, NULL, NULL, NULL, NULL, NULL, NULL, NULL)'],
  ["a person's export", `SELECT platform.export_person(?, now(), '${uuidv7()}', '{}')`],
  ["a person's erasure", `SELECT platform.erase_person(?, now(), '${uuidv7()}', '{}', '{}')`],
  ['the API key list', 'SELECT * FROM platform.api_key_list(?, now())'],
  [
    'an API key created',
    `SELECT platform.create_api_key(?, now(), jsonb_build_object('id', gen_random_uuid(), 'name', 'k', 'secret_hash', encode(sha256(random()::text::bytea), 'hex'),
       'purposes', '["verification_code"]'::jsonb, 'channels', '["email"]'::jsonb, 'requests_per_minute', 60, 'per_destination_per_hour', 5, 'per_destination_per_day', 20))`,
  ],
  ['an API key revoked', `SELECT platform.revoke_api_key(?, now(), '${uuidv7()}')`],
  ['an API key changed', `SELECT platform.change_api_key(?, now(), '${uuidv7()}', '{"sends_per_hour": 1}'::jsonb)`],
  ['the webhook endpoint list', 'SELECT * FROM platform.webhook_endpoint_list(?, now())'],
  [
    'a webhook endpoint created',
    `SELECT platform.create_webhook_endpoint(?, now(), gen_random_uuid(), 'https://hooks.example.test/x', ARRAY['identity.created'], 'v2.sealed')`,
  ],
  ['a webhook endpoint disabled', `SELECT platform.disable_webhook_endpoint(?, now(), '${uuidv7()}')`],
  ['a webhook secret rotated', `SELECT platform.rotate_webhook_secret(?, now(), '${uuidv7()}', 'v2.sealed', now())`],
  ["a webhook endpoint's URL", `SELECT platform.webhook_endpoint_url(?, now(), '${uuidv7()}')`],
  ['a webhook delivery page', `SELECT * FROM platform.webhook_delivery_page(?, now(), '${uuidv7()}', 10)`],
  ['a webhook redrive', `SELECT platform.redrive_webhook_deliveries(?, now(), '${uuidv7()}')`],
]

describe('staff functions called as the api login', () => {
  let db: TestDatabase
  let api: Knex
  let deadLetterId: string
  const call = (sql: string, tokenHash: Buffer) =>
    api.raw(sql, [tokenHash]).then(
      () => 'allowed',
      (error: { code?: string }) => error.code,
    )

  /** A session row for an active identity, optionally staff; the token's hash as the web would pass it. */
  async function session(options: { staff?: 'active' | 'revoked'; expiresAt?: Date; revoked?: boolean; disabled?: boolean } = {}) {
    const { identityId } = await createVerifiedIdentity(db.owner, uniqueEmail('caller'))
    if (options.disabled) await db.owner('identity.identities').where({ id: identityId }).update({ status: 'disabled' })
    const token = randomBytes(32).toString('base64url')
    await db.owner('identity.sessions').insert({
      id: uuidv7(),
      identity_id: identityId,
      token_hash: hashToken(token),
      expires_at: options.expiresAt ?? new Date(Date.now() + 3_600_000),
      revoked_at: options.revoked ? new Date() : null,
    })
    if (options.staff)
      await db
        .owner('platform.staff_members')
        .insert({ identity_id: identityId, revoked_at: options.staff === 'revoked' ? new Date() : null })
    return hashToken(token)
  }

  before(async () => {
    db = await createTestDatabase()
    api = createKnex(db.apiUrl, { applicationName: 'staff-functions-api', max: 2 })
    deadLetterId = await insertOpenMessage(db.owner)
    await db.owner.transaction(async (trx) => {
      await trx('outbox.security_outbox_ciphertexts').where({ message_id: deadLetterId }).delete()
      await trx('outbox.security_outbox_messages')
        .where({ id: deadLetterId })
        .update({ state: 'dead_lettered', dead_lettered_at: new Date() })
      await trx('outbox.security_outbox_dead_letters').insert({ message_id: deadLetterId, reason: 'retries_exhausted' })
    })
  })
  after(async () => {
    await api.destroy()
    await db.drop()
  })

  for (const [what, sql] of CALLS) {
    it(`refuses ${what} with 42501 to a made-up hash, a non-staff session, revoked staff, and revoked or expired sessions`, async () => {
      const callers: [string, Buffer][] = [
        ['no session at all', randomBytes(32)],
        ['a live session of someone who is not staff', await session()],
        ['a live session of revoked staff', await session({ staff: 'revoked' })],
        ['a revoked session of staff', await session({ staff: 'active', revoked: true })],
        ['an expired session of staff', await session({ staff: 'active', expiresAt: new Date(Date.now() - 1_000) })],
        ['a live session of staff whose identity is disabled', await session({ staff: 'active', disabled: true })],
      ]
      for (const [caller, tokenHash] of callers) expect(await call(sql, tokenHash), caller).to.equal('42501')
      expect(await call(sql, await session({ staff: 'active' })), 'a live staff session').to.equal('allowed')
    })
  }

  it('checks every staff function here: each function that takes a session hash is one of the calls above', async () => {
    const { rows } = await db.owner.raw<{ rows: { fn: string }[] }>(
      `SELECT n.nspname || '.' || p.proname AS fn FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname IN ('outbox', 'platform', 'identity') AND pg_get_function_identity_arguments(p.oid) ~ '^p_session(_token){0,1}_hash '
          AND p.proname <> 'staff_identity_for_session'`,
    )
    const called = CALLS.map(([, sql]) => /((?:outbox|platform)\.[a-z_]+)\(/.exec(sql)![1])
    expect(rows.map((row) => row.fn).sort()).to.deep.equal([...new Set(called)].sort())
  })

  it("cannot call back a channel's held messages itself: only the worker and the staff lifts run outbox.release_held_jobs", async () => {
    const code = await api.raw("SELECT outbox.release_held_jobs('email', now(), 'security-outbox')").then(
      () => 'allowed',
      (error: { code?: string }) => error.code,
    )
    expect(code).to.equal('42501')
  })

  it("leaves the owner-only erasure and export cores, and DELETE on what they empty, out of the api login's reach", async () => {
    const person = uuidv7()
    for (const sql of [
      `SELECT platform.erase_person_core('${person}', '{}', '{}', 'web', now())`,
      `SELECT platform.export_person_core('${person}', '{}')`,
      `DELETE FROM identity.login_identifiers WHERE identity_id = '${person}'`,
      `DELETE FROM identity.identities WHERE id = '${person}'`,
      `DELETE FROM platform.audit_records WHERE subject = '${person}'`,
    ]) {
      const code = await api.raw(sql).then(
        () => 'allowed',
        (error: { code?: string }) => error.code,
      )
      expect(code, sql).to.equal('42501')
    }
  })

  it('cannot revive an expired staff session by passing an old clock', async () => {
    const expired = await session({ staff: 'active', expiresAt: new Date(Date.now() - 60_000) })
    const old = new Date(Date.now() - 3_600_000)
    const refused = await api.raw('SELECT * FROM outbox.dead_letter_page(?, ?, 50, NULL, NULL, NULL, NULL)', [expired, old]).then(
      () => 'allowed',
      (error: { code?: string }) => error.code,
    )
    expect(refused).to.equal('42501')
  })

  it('no longer has the versions that trusted a caller-supplied staff id', async () => {
    for (const sql of [
      'SELECT * FROM outbox.backlog_summary(now())',
      'SELECT * FROM outbox.dead_letter_page(50, NULL, NULL, NULL, NULL)',
      `SELECT * FROM outbox.reissue_candidate('${deadLetterId}'::uuid, '${uuidv7()}'::uuid, now())`,
      'SELECT * FROM outbox.dead_letters_since(now())',
    ]) {
      const code = await api.raw(sql).then(
        () => 'allowed',
        (error: { code?: string }) => error.code,
      )
      expect(code, sql).to.equal('42883')
    }
  })

  it('lets a live staff session page the dead letter with its destination masked', async () => {
    const { rows } = await api.raw('SELECT * FROM outbox.dead_letter_page(?, now(), 50, NULL, NULL, NULL, NULL)', [
      await session({ staff: 'active' }),
    ])
    expect(rows.map((row: { message_id: string }) => row.message_id)).to.deep.equal([deadLetterId])
    expect(rows[0].masked_destination).to.not.equal('row@example.com')
  })
})
