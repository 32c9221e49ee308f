import type { Knex } from 'knex'

const CIPHERTEXTS = 'outbox.security_outbox_ciphertexts'

export async function insertCiphertextTx(trx: Knex.Transaction, messageId: string, envelope: string): Promise<void> {
  await trx(CIPHERTEXTS).insert({ message_id: messageId, envelope })
}

export async function selectEnvelopeTx(trx: Knex.Transaction, messageId: string): Promise<string | undefined> {
  const row = await trx(CIPHERTEXTS).select('envelope').where({ message_id: messageId }).first<{ envelope: string } | undefined>()
  return row?.envelope
}

export async function deleteCiphertextTx(trx: Knex.Transaction, messageId: string): Promise<void> {
  await trx(CIPHERTEXTS).where({ message_id: messageId }).delete()
}
