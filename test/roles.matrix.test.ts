import { randomBytes } from 'node:crypto'
import { expect } from 'chai'
import type { Knex } from 'knex'
import { uuidv7 } from 'uuidv7'
import { runExpiryPurge } from '../jobs/expiry-purge.ts'
import { API_ROLE } from '../src/db/roles.ts'
import { assertConnectionRole, UnsafeConnectionError } from '../src/db/connection-guard.ts'
import { createKnex, withCredentials } from '../src/db/knex.ts'
import { bucketKey, hashToken } from '../src/identity/secrets.ts'
import { INVITATION_LIMITS, invitationTokenHash, ORGANIZATION_LIMITS } from '../src/organization/invitations.ts'
import { createTestDatabase, type TestDatabase } from './support/database.ts'
import { capturingLogger, createVerifiedIdentity, insertOpenMessage, uniqueEmail } from './support/helpers.ts'
import { useWebStack } from './support/web-stack.ts'

const ID = '01a22d1f-4e0c-7711-8dbc-3725e1d0239f'
const NO_SESSION = '\\x' + '00'.repeat(32)

/** Least privilege (docs/architecture.md §6): one row per operation a role must never perform; each must fail 42501. */
const FORBIDDEN: Record<'api' | 'worker', [string, string][]> = {
  api: [
    ['read a sealed envelope', 'SELECT envelope FROM outbox.security_outbox_ciphertexts'],
    ['delete a ciphertext', 'DELETE FROM outbox.security_outbox_ciphertexts'],
    ['read outbox messages', 'SELECT destination FROM outbox.security_outbox_messages'],
    ['claim a message (lease it)', `UPDATE outbox.security_outbox_messages SET state = 'leased'`],
    ['publish a message', `UPDATE outbox.security_outbox_messages SET state = 'published', published_at = now()`],
    ['delete a message', 'DELETE FROM outbox.security_outbox_messages'],
    [
      'record an attempt',
      `INSERT INTO outbox.security_outbox_attempts (message_id, attempt_no, outcome, duration_ms) VALUES ('${ID}', 1, 'published', 1)`,
    ],
    ['write a dead letter', `INSERT INTO outbox.security_outbox_dead_letters (message_id, reason) VALUES ('${ID}', 'provider_rejected')`],
    ['pause a provider channel', `INSERT INTO outbox.provider_pauses (channel, paused_until) VALUES ('email', now())`],
    ['claim a pg-boss job', `UPDATE pgboss.job SET state = 'active' WHERE name = 'security-outbox'`],
    ['settle a pg-boss job', `UPDATE pgboss.job SET state = 'completed' WHERE name = 'security-outbox'`],
    ['delete a pg-boss job', `DELETE FROM pgboss.job WHERE name = 'security-outbox'`],
    ['run the identity retention', `SELECT * FROM identity.sweep_expired(now(), '1 day', 1)`],
    // Only fresh jobs of the delivery queue, through the table or its partition.
    ['enqueue into the crash-loop queue', `INSERT INTO pgboss.job (name, data) VALUES ('security-outbox-dlq', '{"messageId": "${ID}"}')`],
    [
      'enqueue into the crash-loop queue’s partition',
      `INSERT INTO pgboss.job_common (name, data) VALUES ('security-outbox-dlq', '{"messageId": "${ID}"}')`,
    ],
    ['enqueue into a maintenance queue', `INSERT INTO pgboss.job (name, data) VALUES ('security-outbox-expiry-purge', '{}')`],
    [
      'forge a failed delivery job',
      `INSERT INTO pgboss.job (name, data, state) VALUES ('security-outbox', '{"messageId": "${ID}"}', 'failed')`,
    ],
    [
      'forge an active delivery job',
      `INSERT INTO pgboss.job_common (name, data, state) VALUES ('security-outbox', '{"messageId": "${ID}"}', 'active')`,
    ],
    // Events out are the worker's: the web files no job of theirs and writes no event or delivery itself.
    ['enqueue a webhook delivery job', `INSERT INTO pgboss.job (name, data) VALUES ('webhook-delivery', '{"deliveryId": "1"}')`],
    ['enqueue a webhook fan-out', `INSERT INTO pgboss.job (name, data) VALUES ('webhook-fan-out', '{}')`],
    [
      'enqueue into the webhook crash-loop queue',
      `INSERT INTO pgboss.job (name, data) VALUES ('webhook-delivery-dlq', '{"deliveryId": "1"}')`,
    ],
    ['read events', 'SELECT payload FROM platform.events'],
    ['append an event directly', `SELECT platform.append_event('identity.created', '{}')`],
    [
      'write a webhook delivery directly',
      `INSERT INTO platform.webhook_deliveries (event_id, endpoint_id, next_attempt_at) VALUES ('${ID}', '${ID}', now())`,
    ],
    // The staff functions without a live staff session (a made-up token hash).
    ['read the backlog without a staff session', `SELECT * FROM outbox.backlog_summary('${NO_SESSION}', now())`],
    [
      'page dead letters without a staff session',
      `SELECT * FROM outbox.dead_letter_page('${NO_SESSION}', now(), 50, NULL, NULL, NULL, NULL)`,
    ],
    ['read a reissue candidate without a staff session', `SELECT * FROM outbox.reissue_candidate('${NO_SESSION}', '${ID}', now())`],
    ['call the staff-session check itself', `SELECT platform.staff_identity_for_session('${NO_SESSION}', now())`],
    ['read the outbox counts behind the staff backlog', 'SELECT * FROM outbox.outbox_counts(now())'],
    [
      'write a delivery event directly',
      `INSERT INTO outbox.security_outbox_delivery_events (message_id, event, occurred_at) VALUES ('${ID}', 'delivered', now())`,
    ],
    ['read delivery events', 'SELECT * FROM outbox.security_outbox_delivery_events'],
    ['read the suppression list', 'SELECT destination_hmac FROM outbox.suppressed_destinations'],
    [
      'suppress a destination directly',
      `INSERT INTO outbox.suppressed_destinations (id, destination_hmac, channel, masked_destination, reason, since) VALUES ('${ID}', '\\x00', 'email', 'x', 'complaint', now())`,
    ],
    ['lift a suppression directly', 'DELETE FROM outbox.suppressed_destinations'],
    // Which channels exist is the workers' to say; the web only asks outbox.available_channels().
    [
      'register delivery channels as a worker',
      `INSERT INTO outbox.delivery_channel_registrations (worker_id, channels, providers, started_at, seen_at) VALUES ('${ID}', '{whatsapp}', '{}', now(), now())`,
    ],
    ['read worker registrations', 'SELECT worker_id, providers FROM outbox.delivery_channel_registrations'],
    // Who asked for a message is the worker's to judge, after the 202: the web cannot ask.
    ['ask who each message is for (the worker’s function)', `SELECT * FROM outbox.message_askers(ARRAY['${ID}'::uuid])`],
    ['write a send cap counter', `INSERT INTO outbox.send_windows (channel, scope, window_start) VALUES ('sms', 'o', now())`],
    ['count a key’s hour directly past its budget', `UPDATE platform.api_keys SET sends_per_hour = 6000000`],
    ['forget worker registrations', 'DELETE FROM outbox.delivery_channel_registrations'],
    ['read the registrations behind the available channels', 'SELECT * FROM outbox.current_channel_registrations()'],
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
    [
      'write a message',
      `INSERT INTO outbox.security_outbox_messages (id, purpose, challenge_id, channel, destination, expires_at) VALUES ('${ID}', 'step_up', '${ID}', 'email', 'x@y.z', now())`,
    ],
    ['write a ciphertext', `INSERT INTO outbox.security_outbox_ciphertexts (message_id, envelope) VALUES ('${ID}', 'v1.a.b.c.d')`],
    // The worker moves a message's state, lease and attempts, never where it goes or what it is.
    ['point a message at another destination', `UPDATE outbox.security_outbox_messages SET destination = 'attacker@example.com'`],
    ['change a message’s channel', `UPDATE outbox.security_outbox_messages SET channel = 'whatsapp'`],
    ['change a message’s purpose', `UPDATE outbox.security_outbox_messages SET purpose = 'step_up'`],
    ['move a message to another challenge', `UPDATE outbox.security_outbox_messages SET challenge_id = '${ID}'`],
    ['move a message to another invitation', `UPDATE outbox.security_outbox_messages SET invitation_id = '${ID}'`],
    ['change a message’s locale', `UPDATE outbox.security_outbox_messages SET locale = 'de'`],
    ['extend a message’s expiry', `UPDATE outbox.security_outbox_messages SET expires_at = expires_at + interval '1 day'`],
    ['change a message’s suppression key', `UPDATE outbox.security_outbox_messages SET destination_hmac = NULL`],
    ['rewrite an attempt', 'UPDATE outbox.security_outbox_attempts SET outcome = outcome'],
    ['delete an attempt directly', 'DELETE FROM outbox.security_outbox_attempts'],
    ['call the web’s supersede function', `SELECT outbox.dead_letter_open_messages('${ID}', 'superseded_by_resend')`],
    ['add rate-limit hits', `INSERT INTO platform.rate_limit_hits (bucket_key, hit_at) VALUES ('\\x00', now())`],
    ['count a rate-limit hit (the web’s function)', `SELECT platform.rate_limit_window(ARRAY['\\x00'::bytea], 1, 60, now(), true)`],
    ['issue a challenge (the web’s function)', `SELECT identity.issue_challenge('{}'::jsonb)`],
    ['enqueue a message (the web’s function)', `SELECT outbox.enqueue_message('{}'::jsonb)`],
    ['insert a delivery job (the web’s function)', `SELECT outbox.insert_delivery_job('[]')`],
    // Events out: the worker fans out and delivers what the triggers appended, and changes no fact of it.
    ['append an event', `SELECT platform.append_event('identity.created', '{}')`],
    ['write an event', `INSERT INTO platform.events (type, payload) VALUES ('identity.created', '{}')`],
    ['rewrite an event', `UPDATE platform.events SET payload = '{}'`],
    ['point a webhook endpoint at another URL', `UPDATE platform.webhook_endpoints SET url = 'https://attacker.example.com/hooks'`],
    ['send a delivery to another endpoint', `UPDATE platform.webhook_deliveries SET endpoint_id = '${ID}'`],
    ['give a delivery another event', `UPDATE platform.webhook_deliveries SET event_id = '${ID}'`],
    ['redrive webhook deliveries (the staff function)', `SELECT platform.redrive_webhook_deliveries('${NO_SESSION}', now(), '${ID}')`],
    ['read the staff backlog', `SELECT * FROM outbox.backlog_summary('${NO_SESSION}', now())`],
    ['read identifiers to judge who asked', 'SELECT value FROM identity.login_identifiers'],
    ['spend a courier key’s hour (the web’s function)', `SELECT platform.spend_api_key_hour('${ID}', now(), 1, 1, true)`],
    ['page dead letters', `SELECT * FROM outbox.dead_letter_page('${NO_SESSION}', now(), 50, NULL, NULL, NULL, NULL)`],
    [
      'record a delivery event (the web’s webhook function)',
      `SELECT * FROM outbox.record_delivery_event('email', 'x', 'delivered', NULL, now(), now(), NULL)`,
    ],
    [
      'write a delivery event directly',
      `INSERT INTO outbox.security_outbox_delivery_events (message_id, event, occurred_at) VALUES ('${ID}', 'delivered', now())`,
    ],
    [
      'suppress a destination',
      `INSERT INTO outbox.suppressed_destinations (id, destination_hmac, channel, masked_destination, reason, since) VALUES ('${ID}', '\\x00', 'email', 'x', 'complaint', now())`,
    ],
    ['lift a suppression', 'DELETE FROM outbox.suppressed_destinations'],
    ['read a suppression’s masked destination', 'SELECT masked_destination FROM outbox.suppressed_destinations'],
    ['create a table', 'CREATE TABLE outbox.sneaky (id int)'],
    ['drop a table', 'DROP TABLE outbox.security_outbox_attempts'],
    ['truncate a table', 'TRUNCATE outbox.security_outbox_attempts'],
  ],
}

/** Refusals the database states as a constraint rather than a privilege: the SQLSTATE each must fail with. */
const REFUSED_BY_CONSTRAINT: ['api' | 'worker', string, string, string][] = [
  [
    'api',
    'name an organization with a line separator',
    `INSERT INTO organization.organizations (id, name, created_by) VALUES ('${ID}', 'Acme' || chr(8232) || 'Verify', (SELECT id FROM identity.identities LIMIT 1))`,
    '23514',
  ],
  [
    'api',
    'name an organization with a bidi override',
    `INSERT INTO organization.organizations (id, name, created_by) VALUES ('${ID}', 'Acme ' || chr(8238) || 'moc', (SELECT id FROM identity.identities LIMIT 1))`,
    '23514',
  ],
  [
    'api',
    'name an organization with a zero-width space',
    `INSERT INTO organization.organizations (id, name, created_by) VALUES ('${ID}', 'evil' || chr(8203) || '.com', (SELECT id FROM identity.identities LIMIT 1))`,
    '23514',
  ],
]

describe('role refusal matrix', () => {
  let db: TestDatabase
  const pools: Partial<Record<'api' | 'worker', Knex>> = {}
  before(async () => {
    db = await createTestDatabase()
    await insertOpenMessage(db.owner)
    await createVerifiedIdentity(db.owner, 'matrix@example.com')
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
        const code = await pools[role]!.raw(sql).then(
          () => 'allowed',
          (error: { code?: string }) => error.code,
        )
        expect(code).to.equal('42501')
      })
    }
  }

  for (const [role, operation, sql, expected] of REFUSED_BY_CONSTRAINT) {
    it(`the ${role} role cannot ${operation} (${expected})`, async () => {
      const code = await pools[role]!.raw(sql).then(
        () => 'allowed',
        (error: { code?: string }) => error.code,
      )
      expect(code).to.equal(expected)
    })
  }

  it('the api role cannot run the expiry purge', async () => {
    const error = await runExpiryPurge({
      db: pools.api!,
      boss: undefined as never,
      clock: () => new Date(Date.now() + 3_600_000),
      logger: capturingLogger().logger,
    }).then(
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
      const refused = await assertConnectionRole(bypass, API_ROLE, 'API_DATABASE_URL').then(
        () => undefined,
        (error: Error) => error,
      )
      expect(refused).to.be.instanceOf(UnsafeConnectionError)
      expect(refused?.message).to.include('BYPASSRLS')
    } finally {
      await bypass.destroy()
      await db.owner.raw(`DROP ROLE ${login}`)
    }
  })
})

/**
 * The HTTP refusals as the web answers them, one row each,
 * arranged directly in the database (budgets pre-filled as rate-limit hits) so each row is one request.
 */
describe('HTTP refusal matrix', () => {
  const f = useWebStack({ worker: false })
  const INVITE_TOKEN = randomBytes(32)

  async function signedIn(email = uniqueEmail('matrix')) {
    const { identityId } = await createVerifiedIdentity(f.db.owner, email)
    const token = randomBytes(32).toString('base64url')
    const sessionId = uuidv7()
    await f.db
      .owner('identity.sessions')
      .insert({ id: sessionId, identity_id: identityId, token_hash: hashToken(token), expires_at: new Date(Date.now() + 3_600_000) })
    return { identityId, sessionId, email, auth: f.stack.bearer(token) }
  }
  async function spend(kind: string, value: string, hits: number) {
    const bucket = bucketKey(f.keys.codeHashKey, kind, value)
    await f.db.owner('platform.rate_limit_hits').insert(Array.from({ length: hits }, () => ({ bucket_key: bucket, hit_at: new Date() })))
  }
  async function organizationOf(person: { auth: Record<string, string> }) {
    const created = await f.stack.call('POST', '/organizations', { name: 'Matrix Org' }, person.auth)
    expect(created.status).to.equal(201)
    return String(created.body!.id)
  }

  const ROWS: [string, number, string, () => Promise<{ method: string; path: string; body?: unknown; headers: Record<string, string> }>][] =
    [
      [
        'an organization name carrying a link',
        422,
        'invalid_organization_name',
        async () => ({
          method: 'POST',
          path: '/organizations',
          body: { name: 'Security team: verify at https://evil.example' },
          headers: (await signedIn()).auth,
        }),
      ],
      [
        'an organization name with a look-alike dot',
        422,
        'invalid_organization_name',
        async () => ({ method: 'POST', path: '/organizations', body: { name: 'Verify at evil。com' }, headers: (await signedIn()).auth }),
      ],
      [
        'a sixth organization in a day',
        429,
        'organization_rate_limited',
        async () => {
          const person = await signedIn()
          await spend('organization-creator', person.identityId, ORGANIZATION_LIMITS.perIdentityPerDay)
          return { method: 'POST', path: '/organizations', body: { name: 'One too many' }, headers: person.auth }
        },
      ],
      [
        'an inviter past its invitations of the day',
        429,
        'invitation_inviter_rate_limited',
        async () => {
          const admin = await signedIn()
          const organizationId = await organizationOf(admin)
          await spend('invitation-inviter', admin.identityId, INVITATION_LIMITS.perInviterPerDay)
          return {
            method: 'POST',
            path: `/organizations/${organizationId}/invitations`,
            body: { email: uniqueEmail('x') },
            headers: admin.auth,
          }
        },
      ],
      [
        'an address past its budget from one inviter (+tag included)',
        429,
        'invitation_address_rate_limited',
        async () => {
          const admin = await signedIn()
          const organizationId = await organizationOf(admin)
          const victim = uniqueEmail('victim')
          await spend('invitation-address-inviter', `${admin.identityId}:${victim}`, INVITATION_LIMITS.perAddressPerInviterPerDay)
          return {
            method: 'POST',
            path: `/organizations/${organizationId}/invitations`,
            body: { email: victim.replace('@', '+again@') },
            headers: admin.auth,
          }
        },
      ],
      [
        'a forwarded invitation link used by another account',
        422,
        'invalid_invitation',
        async () => {
          const admin = await signedIn()
          const organizationId = await organizationOf(admin)
          await f.db.owner('organization.invitations').insert({
            id: uuidv7(),
            organization_id: organizationId,
            email: uniqueEmail('invitee'),
            token_hash: invitationTokenHash(INVITE_TOKEN),
            invited_by: admin.identityId,
            expires_at: new Date(Date.now() + 3_600_000),
          })
          return {
            method: 'POST',
            path: '/invitations/acceptance',
            body: { token: INVITE_TOKEN.toString('base64url') },
            headers: (await signedIn()).auth,
          }
        },
      ],
      [
        'a staff route to a session that is not staff',
        403,
        'not_staff',
        async () => ({ method: 'GET', path: '/platform-admin/security-outbox/dead-letters', headers: (await signedIn()).auth }),
      ],
      [
        'a reissue of a provider_rejected dead letter',
        409,
        'reissue_refused_provider_rejected',
        async () => {
          const staff = await signedIn()
          await f.db.owner('platform.staff_members').insert({ identity_id: staff.identityId })
          const elevation = randomBytes(32).toString('base64url')
          await f.db.owner('identity.elevations').insert({
            id: uuidv7(),
            identity_id: staff.identityId,
            session_id: staff.sessionId,
            token_hash: hashToken(elevation),
            expires_at: new Date(Date.now() + 300_000),
          })
          const messageId = await insertOpenMessage(f.db.owner)
          await f.db.owner.transaction(async (trx) => {
            await trx('outbox.security_outbox_ciphertexts').where({ message_id: messageId }).delete()
            await trx('outbox.security_outbox_messages')
              .where({ id: messageId })
              .update({ state: 'dead_lettered', dead_lettered_at: new Date() })
            await trx('outbox.security_outbox_dead_letters').insert({
              message_id: messageId,
              reason: 'provider_rejected',
              last_failure_class: 'REJECTED',
            })
          })
          return {
            method: 'POST',
            path: `/platform-admin/security-outbox/dead-letters/${messageId}/reissues`,
            headers: { ...staff.auth, 'x-elevation-token': elevation, 'idempotency-key': uuidv7() },
          }
        },
      ],
    ]

  for (const [refusal, status, code, arrange] of ROWS) {
    it(`refuses ${refusal}: ${status} ${code}`, async () => {
      const request = await arrange()
      const answer = await f.stack.call(request.method, request.path, request.body, request.headers)
      expect(answer.status).to.equal(status)
      expect(answer.body).to.include({ code })
      if (status === 429) expect(Number(answer.headers.get('retry-after'))).to.be.greaterThan(0)
    })
  }
})
