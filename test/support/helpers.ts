import { randomBytes } from 'node:crypto'
import { PassThrough } from 'node:stream'
import type { Knex } from 'knex'
import { uuidv7 } from 'uuidv7'
import { loadConfig, type Config } from '../../src/providers/config.ts'
import { insertActiveIdentityTx } from '../../src/identity/identities-sql.ts'
import { newToken } from '../../src/identity/secrets.ts'
import { insertElevationTx, insertSessionTx } from '../../src/identity/sessions-sql.ts'
import { parseIdentifier } from '../../src/identity/identifiers.ts'
import { createLogger, type Logger } from '../../src/logging/logger.ts'
import { singleKeyRing, type KeyRing } from '../../src/crypto/key-ring.ts'
import { keysFromRings, type Keys } from '../../src/runtime/dev-keys.ts'

export function testKeys(): Keys {
  return keysFromRings(singleKeyRing(randomBytes(32)), singleKeyRing(randomBytes(32)))
}

/** A ring as OUTBOX_ENCRYPTION_KEYS / CODE_HASH_KEYS spell it: `id:base64key,…`. */
export function ringSetting(ring: KeyRing): string {
  return ring.map(({ id, key }) => `${id}:${key.toString('base64')}`).join(',')
}

/** A logger whose every line is kept, to assert on what would have reached stdout. */
export function capturingLogger(): { logger: Logger; text: () => string } {
  const stream = new PassThrough()
  const chunks: string[] = []
  stream.on('data', (chunk: Buffer) => chunks.push(chunk.toString('utf8')))
  return { logger: createLogger({ level: 'debug', stream }), text: () => chunks.join('') }
}

/** A unique address per test, so tests sharing the emulator's inbox never see each other's mail. */
export function uniqueEmail(prefix = 'person'): string {
  return `${prefix}.${randomBytes(4).toString('hex')}@example.com`
}

/** An active identity with a verified email address or E.164 phone number. */
export async function createVerifiedIdentity(owner: Knex, identifier: string): Promise<{ identityId: string; loginIdentifierId: string }> {
  const parsed = parseIdentifier(identifier)
  if (!parsed) throw new Error('not an identifier')
  const ids = { identityId: uuidv7(), loginIdentifierId: uuidv7() }
  await owner.transaction((trx) => insertActiveIdentityTx(trx, ids, parsed, new Date()))
  return ids
}

/**
 * A session of the identity with a live step-up elevation, written directly (as a test arranges
 * rows): the headers a stepped-up client sends, `Authorization` and `X-Elevation-Token`.
 */
export async function createElevatedSession(owner: Knex, identityId: string, now = new Date()): Promise<Record<string, string>> {
  const session = newToken()
  const elevation = newToken()
  const sessionId = uuidv7()
  await owner.transaction(async (trx) => {
    await insertSessionTx(trx, { id: sessionId, identityId, tokenHash: session.hash, expiresAt: new Date(now.getTime() + 3_600_000), now })
    await insertElevationTx(trx, {
      id: uuidv7(),
      identityId,
      sessionId,
      tokenHash: elevation.hash,
      expiresAt: new Date(now.getTime() + 300_000),
      now,
    })
  })
  return { authorization: `Bearer ${session.token}`, 'x-elevation-token': elevation.token }
}

let phoneCounter = 0
/**
 * A unique E.164 number per call (WhatsApp destinations): a valid Buenos Aires mobile,
 * +54 9 11 then 8 digits, so the web's number check (src/outbox/phone-numbers.ts) accepts it.
 */
export function uniquePhone(): string {
  phoneCounter += 1
  return `+54911${String(4000 + (Math.floor(Date.now() / 1000) % 5000)).padStart(4, '0')}${String(phoneCounter % 10_000).padStart(4, '0')}`
}

/** Polls `probe` every 25 ms until it returns a value other than undefined, or fails after `timeoutMs`. */
export async function eventually<T>(probe: () => Promise<T | undefined>, what: string, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

export type StoredEmail = { destination: { to: string[] }; subject: string; body: { text?: string }; messageId: string }

/** Emails the SES emulator received for one address. */
export async function inbox(emulatorUrl: string, to: string): Promise<StoredEmail[]> {
  const response = await fetch(`${emulatorUrl}/store`)
  const { emails } = (await response.json()) as { emails: StoredEmail[] }
  return emails.filter((email) => email.destination.to.includes(to))
}

/**
 * Points a message elsewhere as only the owner can, with `messages_identity_immutable` switched off
 * for this one statement: how a row edited by hand or restored from another database looks.
 */
export async function editMessageBypassingTrigger(owner: Knex, messageId: string, change: Record<string, unknown>): Promise<void> {
  await owner.transaction(async (trx) => {
    await trx.raw('ALTER TABLE outbox.security_outbox_messages DISABLE TRIGGER messages_identity_immutable')
    await trx('outbox.security_outbox_messages').where({ id: messageId }).update(change)
    await trx.raw('ALTER TABLE outbox.security_outbox_messages ENABLE TRIGGER messages_identity_immutable')
  })
}

/** Rows for schema-level tests: a challenge and one open message with its ciphertext, as the owner. */
export async function insertOpenMessage(owner: Knex, overrides: Record<string, unknown> = {}): Promise<string> {
  const { identityId, loginIdentifierId } = await createVerifiedIdentity(owner, uniqueEmail('row'))
  const challengeId = uuidv7()
  await owner('identity.challenges').insert({
    id: challengeId,
    purpose: 'password_recovery',
    identity_id: identityId,
    login_identifier_id: loginIdentifierId,
    code_hash: randomBytes(32),
    expires_at: new Date(Date.now() + 600_000),
  })
  const id = uuidv7()
  await owner.transaction(async (trx) => {
    await trx('outbox.security_outbox_messages').insert({
      id,
      purpose: 'password_recovery',
      challenge_id: challengeId,
      channel: 'email',
      destination: 'row@example.com',
      expires_at: new Date(Date.now() + 600_000),
      ...overrides,
    })
    await trx('outbox.security_outbox_ciphertexts').insert({ message_id: id, envelope: 'v1.a.b.c.d' })
  })
  return id
}

/** The worker settings of a default configuration, with a test's overrides. */
export function workerConfig(overrides: Partial<Config> = {}): Config {
  return { ...loadConfig({ NODE_ENV: 'test' }, 'all-in-one'), WORKER_CONCURRENCY: 4, SEND_TIMEOUT_MS: 5_000, ...overrides }
}

/**
 * Every text, JSON, array or bytea column of every table in our schemas and pg-boss's that holds
 * `needle` in plaintext, as `schema.table.column`; the scan refuses to pass if it found few columns.
 */
export async function columnsContaining(owner: Knex, needle: string): Promise<string[]> {
  const columns: { table_schema: string; table_name: string; column_name: string; data_type: string }[] = await owner
    .select('c.table_schema', 'c.table_name', 'c.column_name', 'c.data_type')
    .from('information_schema.columns as c')
    .join('information_schema.tables as t', function () {
      this.on('t.table_schema', 'c.table_schema').andOn('t.table_name', 'c.table_name')
    })
    .whereIn('c.table_schema', ['identity', 'organization', 'outbox', 'platform', 'pgboss', 'public'])
    .andWhere('t.table_type', 'BASE TABLE')
    .whereIn('c.data_type', ['text', 'character varying', 'json', 'jsonb', 'bytea', 'ARRAY'])
  if (columns.length <= 20) throw new Error(`the scan found only ${columns.length} columns`)
  const hits: string[] = []
  for (const column of columns) {
    const target = `"${column.table_schema}"."${column.table_name}"`
    const predicate =
      column.data_type === 'bytea'
        ? owner.raw('position(convert_to(?, ?) in ??) > 0', [needle, 'UTF8', column.column_name])
        : owner.raw('??::text LIKE ?', [column.column_name, `%${needle}%`])
    const [row] = await owner(owner.raw(target)).count({ n: '*' }).where(predicate)
    if (Number(row?.n) > 0) hits.push(`${column.table_schema}.${column.table_name}.${column.column_name}`)
  }
  return hits
}
