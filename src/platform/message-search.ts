import type { Knex } from 'knex'
import { DomainError } from '../identity/errors.ts'
import { channelFor, parseIdentifier } from '../identity/identifiers.ts'
import { messagesByDestinationRows } from '../outbox/console-functions-sql.ts'
import { destinationHmac } from '../outbox/destination.ts'
import { asStaff, type StaffSession } from './outbox-admin.ts'

/**
 * `POST /platform-admin/security-outbox/message-searches`: the messages sent to one destination,
 * found through the keyed hash the suppression list uses (`destinationHmac`, under every code-hash
 * key, current first, so messages enqueued before a key rotation are found too), never by reading
 * destinations. The exact address matches (an email lower-cased and trimmed), not its variants:
 * `a+x@` is another destination. Newest first, keyset pages by message id (UUIDv7, time-ordered);
 * destinations masked. Messages enqueued before their hash existed are not found (docs/operations.md).
 */
export async function messagesToDestination(
  db: Knex,
  keys: { codeHashKey: Buffer; codeHashKeys?: readonly Buffer[] },
  input: { staff: Pick<StaffSession, 'tokenHash'>; now: Date; destination: string; limit: number; before?: string },
) {
  const identifier = parseIdentifier(input.destination)
  if (!identifier) throw new DomainError('invalid_destination', 'Give an email address or an E.164 phone number.')
  const channel = channelFor(identifier)
  const hmacs = (keys.codeHashKeys ?? [keys.codeHashKey]).map((key) => destinationHmac(key, channel, identifier.value))
  const rows = await asStaff(() =>
    messagesByDestinationRows(db, input.staff.tokenHash, input.now, hmacs, {
      limit: input.limit + 1,
      ...(input.before ? { beforeId: input.before } : {}),
    }),
  )
  const page = rows.slice(0, input.limit)
  return {
    items: page.map((row) => ({
      messageId: row.message_id,
      purpose: row.purpose,
      channel: row.channel,
      maskedDestination: row.masked_destination,
      state: row.state,
      attemptCount: row.attempt_count,
      lastFailureClass: row.last_failure_class,
      deadLetterReason: row.dead_letter_reason,
      providers: row.providers,
      createdAt: row.created_at.toISOString(),
      expiresAt: row.expires_at.toISOString(),
    })),
    pageInfo: { hasNextPage: rows.length > input.limit, endCursor: page.at(-1)?.message_id ?? null },
  }
}
