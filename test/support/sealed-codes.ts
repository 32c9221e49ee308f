import { envelopeContext, open } from '../../src/crypto/envelope.ts'
import type { Keys } from '../../src/runtime/dev-keys.ts'
import type { TestDatabase } from './database.ts'

/**
 * What the worker would send for the newest still-sealed message to `destination` (its code, or a
 * security notice's JSON), opened with the test's keys: tests that run no worker read codes here.
 */
export async function newestSealed(
  db: TestDatabase,
  keys: Keys,
  destination: string,
  purpose?: string,
): Promise<{ messageId: string; purpose: string; text: string }> {
  const query = db
    .owner('outbox.security_outbox_messages as m')
    .join('outbox.security_outbox_ciphertexts as c', 'c.message_id', 'm.id')
    .where({ 'm.destination': destination })
    .select('m.id', 'm.purpose', 'm.channel', 'm.destination', 'c.envelope')
    .orderBy('m.id', 'desc')
  const row = await (purpose ? query.andWhere({ 'm.purpose': purpose }) : query).first<
    { id: string; purpose: string; channel: string; destination: string; envelope: string } | undefined
  >()
  if (!row) throw new Error('no sealed message to that destination')
  return {
    messageId: row.id,
    purpose: row.purpose,
    text: open(keys.outboxKey, row.envelope, envelopeContext(row.id, row.purpose, row.channel, row.destination)).toString('utf8'),
  }
}

/** The code of the newest sealed message to `destination`. */
export async function newestCode(db: TestDatabase, keys: Keys, destination: string): Promise<string> {
  return (await newestSealed(db, keys, destination)).text
}
