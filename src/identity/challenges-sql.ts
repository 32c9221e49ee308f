import type { Knex } from 'knex'
import type { ChallengePurpose } from '../outbox/constants.ts'

export type NewChallenge = {
  id: string
  purpose: ChallengePurpose
  identityId: string
  loginIdentifierId: string
  codeHash: Buffer
  expiresAt: Date
  now: Date
}

export async function insertChallengeTx(trx: Knex.Transaction, challenge: NewChallenge): Promise<void> {
  await trx('identity.challenges').insert({
    id: challenge.id,
    purpose: challenge.purpose,
    identity_id: challenge.identityId,
    login_identifier_id: challenge.loginIdentifierId,
    code_hash: challenge.codeHash,
    expires_at: challenge.expiresAt,
    last_sent_at: challenge.now,
    created_at: challenge.now,
  })
}
