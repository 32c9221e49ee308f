import type { BenchStack } from './stack.ts'

/**
 * After the run, the guarantees the figures were bought under: every published message has
 * exactly one published attempt and attempt_count in step with its attempt rows, no published
 * message keeps its ciphertext, and the fake phone providers saw exactly as many calls per
 * destination as there are attempt rows for it. Both fakes count: a WhatsApp code's retry may go
 * out by SMS (its route's next phone channel, docs/delivery.md), through the fake Twilio.
 */
export async function spotCheck(stack: BenchStack) {
  const one = async (sql: string) => Number((await stack.owner.raw(sql)).rows[0].count)
  const published = await one(`SELECT count(*) FROM outbox.security_outbox_messages WHERE state = 'published'`)
  const wrongAttempts = await one(`
    SELECT count(*) FROM outbox.security_outbox_messages m
     WHERE m.state = 'published'
       AND (m.attempt_count <> (SELECT count(*) FROM outbox.security_outbox_attempts a WHERE a.message_id = m.id)
         OR (SELECT count(*) FROM outbox.security_outbox_attempts a WHERE a.message_id = m.id AND a.outcome = 'published') <> 1)`)
  const ciphertextLeft = await one(`
    SELECT count(*) FROM outbox.security_outbox_messages m JOIN outbox.security_outbox_ciphertexts c ON c.message_id = m.id
     WHERE m.state IN ('published', 'dead_lettered')`)
  const attemptsByDestination = new Map<string, number>(
    (
      await stack.owner.raw(`
      SELECT m.destination, count(a.*)::int AS attempts FROM outbox.security_outbox_messages m
        JOIN outbox.security_outbox_attempts a ON a.message_id = m.id
       WHERE m.channel IN ('whatsapp', 'sms') GROUP BY m.destination`)
    ).rows.map((row: { destination: string; attempts: number }) => [row.destination, row.attempts]),
  )
  const callsByDestination = new Map<string, number>()
  const acceptedByDestination = new Map<string, number>()
  const phoneCalls = [...stack.wasender.requests, ...stack.sms.fake.requests]
  for (const request of phoneCalls) {
    callsByDestination.set(request.to, (callsByDestination.get(request.to) ?? 0) + 1)
    if (request.accepted) acceptedByDestination.set(request.to, (acceptedByDestination.get(request.to) ?? 0) + 1)
  }
  // Sent twice: the provider took the message on more than once. Allowed only where the bench
  // injected an ambiguous outcome (the provider sent, then never answered).
  const sentTwice = [...acceptedByDestination].filter(([destination, accepted]) => accepted > 1 && !stack.ambiguous.has(destination)).length
  const sentTwiceAmbiguous = [...acceptedByDestination].filter(
    ([destination, accepted]) => accepted > 1 && stack.ambiguous.has(destination),
  ).length
  let callMismatches = 0
  for (const destination of new Set([...attemptsByDestination.keys(), ...callsByDestination.keys()])) {
    if ((attemptsByDestination.get(destination) ?? 0) !== (callsByDestination.get(destination) ?? 0)) callMismatches += 1
  }
  const ok = published > 0 && wrongAttempts === 0 && ciphertextLeft === 0 && callMismatches === 0 && sentTwice === 0
  return {
    ok,
    published,
    wrongAttempts,
    ciphertextLeft,
    providerCalls: phoneCalls.length,
    callMismatches,
    sentTwice,
    sentTwiceAmbiguous,
    summary:
      `${ok ? 'OK' : 'FAILED'}: ${published} published; ${wrongAttempts} with attempts out of step; ${ciphertextLeft} final messages with a ciphertext; ` +
      `${phoneCalls.length} provider calls, ${callMismatches} destinations whose calls ≠ attempt rows; ` +
      `${sentTwice} messages sent twice without an injected ambiguous outcome (${sentTwiceAmbiguous} after one, allowed)`,
  }
}
