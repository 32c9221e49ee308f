import { randomBytes } from 'node:crypto'
import { uuidv7 } from 'uuidv7'
import { createBoss } from '../../src/db/boss.ts'
import { createKnex } from '../../src/db/knex.ts'
import type { Logger } from '../../src/logging/logger.ts'
import { enqueueSecurityMessageTx } from '../../src/outbox/enqueue.ts'
import type { Keys } from '../../src/runtime/dev-keys.ts'
import type { TestDatabase } from './database.ts'
import { createVerifiedIdentity } from './helpers.ts'

/**
 * A sign-up code for `phone` enqueued on the `sms` channel through the web's own enqueue (sealed,
 * bound to `sms` and the number), as a deployment whose phone channel is SMS would: the routing of
 * phone identifiers to SMS is another part of the work, the delivery and its feedback are tested here.
 */
export async function enqueueSmsCode(db: TestDatabase, keys: Keys, logger: Logger, phone: string): Promise<{ messageId: string }> {
  const { identityId, loginIdentifierId } = await createVerifiedIdentity(db.owner, phone)
  const challengeId = uuidv7()
  const expiresAt = new Date(Date.now() + 600_000)
  await db.owner('identity.challenges').insert({
    id: challengeId,
    purpose: 'sign_up',
    identity_id: identityId,
    login_identifier_id: loginIdentifierId,
    code_hash: randomBytes(32),
    expires_at: expiresAt,
  })
  const api = createKnex(db.apiUrl, { applicationName: 'test-sms-enqueue' })
  const boss = createBoss(db.apiUrl, 'web', logger)
  await boss.start()
  try {
    return await api.transaction((trx) =>
      enqueueSecurityMessageTx(
        trx,
        { boss, outboxKey: keys.outboxKey, codeHashKey: keys.codeHashKey, logger },
        { purpose: 'sign_up', challengeId, channel: 'sms', destination: phone, locale: 'en', expiresAt },
        Buffer.from('123456', 'utf8'),
      ),
    )
  } finally {
    await boss.stop({ graceful: false })
    await api.destroy()
  }
}
