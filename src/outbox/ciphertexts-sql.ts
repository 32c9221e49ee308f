import type { Knex } from 'knex'

const CIPHERTEXTS = 'outbox.security_outbox_ciphertexts'

/** The sealed envelopes of several messages, by message id (absent when a message has none). */
export async function selectEnvelopesTx(trx: Knex.Transaction, messageIds: readonly string[]): Promise<Map<string, string>> {
  if (messageIds.length === 0) return new Map()
  const rows = await trx(CIPHERTEXTS).select('message_id', 'envelope').whereIn('message_id', messageIds)
  return new Map(rows.map((row: { message_id: string; envelope: string }) => [row.message_id, row.envelope]))
}

export async function deleteCiphertextsTx(trx: Knex.Transaction, messageIds: readonly string[]): Promise<void> {
  if (messageIds.length === 0) return
  await trx(CIPHERTEXTS).whereIn('message_id', messageIds).delete()
}
