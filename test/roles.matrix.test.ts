import { randomBytes } from 'node:crypto'
import { expect } from 'chai'
import type { Knex } from 'knex'
import { runExpiryPurge } from '../jobs/expiry-purge.ts'
import { API_ROLE } from '../migrations/20261130000100_roles.ts'
import { assertConnectionRole, UnsafeConnectionError } from '../src/db/connection-guard.ts'
import { createKnex, withCredentials } from '../src/db/knex.ts'
import { createTestDatabase, type TestDatabase } from './support/database.ts'
import { capturingLogger, insertOpenMessage } from './support/helpers.ts'

const ID = '01a22d1f-4e0c-7711-8dbc-3725e1d0239f'

/** DESIGN §7 / OX-W9, OX-W10: one row per operation a role must never perform; each must fail 42501. */
const FORBIDDEN: Record<'api' | 'worker', [string, string][]> = {
  api: [
    ['read a sealed envelope', 'SELECT envelope FROM outbox.security_outbox_ciphertexts'],
    ['delete a ciphertext', 'DELETE FROM outbox.security_outbox_ciphertexts'],
    ['read outbox messages', 'SELECT destination FROM outbox.security_outbox_messages'],
    ['claim a message (lease it)', `UPDATE outbox.security_outbox_messages SET state = 'leased'`],
    ['publish a message', `UPDATE outbox.security_outbox_messages SET state = 'published', published_at = now()`],
    ['delete a message', 'DELETE FROM outbox.security_outbox_messages'],
    ['record an attempt', `INSERT INTO outbox.security_outbox_attempts (message_id, attempt_no, outcome, duration_ms) VALUES ('${ID}', 1, 'published', 1)`],
    ['write a dead letter', `INSERT INTO outbox.security_outbox_dead_letters (message_id, reason) VALUES ('${ID}', 'provider_rejected')`],
    ['pause a provider channel', `INSERT INTO outbox.provider_pauses (channel, paused_until) VALUES ('email', now())`],
    ['claim a pg-boss job', `UPDATE pgboss.job SET state = 'active' WHERE name = 'security-outbox'`],
    ['settle a pg-boss job', `UPDATE pgboss.job SET state = 'completed' WHERE name = 'security-outbox'`],
    ['delete a pg-boss job', `DELETE FROM pgboss.job WHERE name = 'security-outbox'`],
    ['run the identity retention', `SELECT * FROM identity.sweep_expired(now(), '1 day', 1)`],
    ['write a delivery event directly', `INSERT INTO outbox.security_outbox_delivery_events (message_id, event, occurred_at) VALUES ('${ID}', 'delivered', now())`],
    ['read delivery events', 'SELECT * FROM outbox.security_outbox_delivery_events'],
    ['read the suppression list', 'SELECT destination_hmac FROM outbox.suppressed_destinations'],
    ['suppress a destination directly', `INSERT INTO outbox.suppressed_destinations (id, destination_hmac, channel, masked_destination, reason, since) VALUES ('${ID}', '\\x00', 'email', 'x', 'complaint', now())`],
    ['lift a suppression directly', 'DELETE FROM outbox.suppressed_destinations'],
    ['create a table', 'CREATE TABLE outbox.sneaky (id int)'],
    ['alter a table', 'ALTER TABLE identity.challenges ADD COLUMN sneaky int'],
    ['drop a table', 'DROP TABLE outbox.security_outbox_attempts'],
    ['truncate a table', 'TRUNCATE identity.sessions'],
  ],
  worker: [
    ['read password hashes', 'SELECT password_hash FROM identity.password_credentials'],
    ['read code hashes', 'SELECT code_hash FROM identity.challenges'],
    ['read candidate passwords', 'SELECT candidate_password_hash FROM identity.challenges'],
    ['read sessions', 'SELECT token_hash FROM identity.sessions'],
    ['read elevations', 'SELECT token_hash FROM identity.elevations'],
    ['read identities', 'SELECT status FROM identity.identities'],
    ['change a challenge', 'UPDATE identity.challenges SET consumed_at = now()'],
    ['write a message', `INSERT INTO outbox.security_outbox_messages (id, purpose, challenge_id, channel, destination, expires_at) VALUES ('${ID}', 'step_up', '${ID}', 'email', 'x@y.z', now())`],
    ['write a ciphertext', `INSERT INTO outbox.security_outbox_ciphertexts (message_id, envelope) VALUES ('${ID}', 'v1.a.b.c.d')`],
    ['rewrite an attempt', 'UPDATE outbox.security_outbox_attempts SET outcome = outcome'],
    ['delete an attempt directly', 'DELETE FROM outbox.security_outbox_attempts'],
    ['call the web’s supersede function', `SELECT outbox.dead_letter_open_messages('${ID}', 'superseded_by_resend')`],
    ['add rate-limit hits', `INSERT INTO platform.rate_limit_hits (bucket_key, hit_at) VALUES ('\\x00', now())`],
    ['record a delivery event (the web’s webhook function)', `SELECT * FROM outbox.record_delivery_event('email', 'x', 'delivered', NULL, now(), now(), NULL)`],
    ['write a delivery event directly', `INSERT INTO outbox.security_outbox_delivery_events (message_id, event, occurred_at) VALUES ('${ID}', 'delivered', now())`],
    ['suppress a destination', `INSERT INTO outbox.suppressed_destinations (id, destination_hmac, channel, masked_destination, reason, since) VALUES ('${ID}', '\\x00', 'email', 'x', 'complaint', now())`],
    ['lift a suppression', 'DELETE FROM outbox.suppressed_destinations'],
    ['read a suppression’s masked destination', 'SELECT masked_destination FROM outbox.suppressed_destinations'],
    ['create a table', 'CREATE TABLE outbox.sneaky (id int)'],
    ['drop a table', 'DROP TABLE outbox.security_outbox_attempts'],
    ['truncate a table', 'TRUNCATE outbox.security_outbox_attempts'],
  ],
}

describe('role refusal matrix', () => {
  let db: TestDatabase
  const pools: Partial<Record<'api' | 'worker', Knex>> = {}
  before(async () => {
    db = await createTestDatabase()
    await insertOpenMessage(db.owner)
    pools.api = createKnex(db.apiUrl, { applicationName: 'matrix-api', max: 2 })
    pools.worker = createKnex(db.workerUrl, { applicationName: 'matrix-worker', max: 2 })
  })
  after(async () => {
    await Promise.all([pools.api?.destroy(), pools.worker?.destroy()])
    await db.drop()
  })

  for (const role of ['api', 'worker'] as const) {
    for (const [operation, sql] of FORBIDDEN[role]) {
      it(`the ${role} role cannot ${operation}`, async () => {
        const code = await pools[role]!.raw(sql).then(() => 'allowed', (error: { code?: string }) => error.code)
        expect(code).to.equal('42501')
      })
    }
  }

  it('the api role cannot run the expiry purge', async () => {
    const error = await runExpiryPurge({ db: pools.api!, boss: undefined as never, clock: () => new Date(Date.now() + 3_600_000), logger: capturingLogger().logger }).then(
      () => undefined,
      (failure: { code?: string }) => failure,
    )
    expect(error?.code).to.equal('42501')
  })

  it('refuses to start on a BYPASSRLS login even when it is a member of the right group', async () => {
    const login = `sealpost_test_bypass_${randomBytes(4).toString('hex')}`
    const password = randomBytes(12).toString('hex')
    await db.owner.raw(`CREATE ROLE ${login} LOGIN BYPASSRLS PASSWORD '${password}' IN ROLE ${API_ROLE}`)
    const bypass = createKnex(withCredentials(db.ownerUrl, login, password), { applicationName: 'matrix-bypass', max: 1 })
    try {
      const refused = await assertConnectionRole(bypass, API_ROLE, 'API_DATABASE_URL').then(() => undefined, (error: Error) => error)
      expect(refused).to.be.instanceOf(UnsafeConnectionError)
      expect(refused?.message).to.include('BYPASSRLS')
    } finally {
      await bypass.destroy()
      await db.owner.raw(`DROP ROLE ${login}`)
    }
  })
})
