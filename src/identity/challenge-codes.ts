import type { Knex } from 'knex'
import { verifyCode } from '../crypto/codes.ts'
import type { ChallengePurpose } from '../outbox/constants.ts'
import { deadLetterChallengeMessagesTx } from '../outbox/web-functions-sql.ts'
import { WRONG_CODE_BUDGET, WRONG_CODES, type ChallengeDeps } from './challenges.ts'
import { consumeChallengeTx, lockOpenChallengeTx, spendAttemptTx, type ChallengeRow, type ChallengeSubject } from './challenges-sql.ts'
import { canonicalDestination, type Identifier } from './identifiers.ts'
import { budget, clearBucketTx, spendTiersTx, tiersWait, type Tier } from './rate-limits.ts'
import { ownerBudgetTiers, type Requester } from './requester.ts'
import { bucketKeys } from './secrets.ts'

/** What checking a code decided: the consumed challenge, or a refusal (with a wait when the identity's wrong-code budget is spent). */
export type CodeCheck = { kind: 'verified'; challenge: ChallengeRow } | { kind: 'refused'; budgetRetryAfterSeconds?: number }

const wrongCodeBucket = (deps: Pick<ChallengeDeps, 'codeHashKey' | 'codeHashKeys'>, purpose: ChallengePurpose, owner: string) =>
  bucketKeys(deps, `wrong-codes:${purpose}`, owner)

/**
 * The wrong-code budget a guess spends: on the anonymous routes (a `requester`) the requester's
 * tiers of the owner's budget, so a stranger's guesses do not lock the owner's client out; on the
 * signed-in routes the identity's own single budget (only a session of the identity can guess there).
 */
function wrongCodeTiers(
  deps: Pick<ChallengeDeps, 'codeHashKey' | 'codeHashKeys'>,
  purpose: ChallengePurpose,
  owner: string,
  requester: Requester | undefined,
  identityId: string | undefined,
): Tier[] {
  if (!requester) return [{ bucket: wrongCodeBucket(deps, purpose, owner), limit: WRONG_CODES }]
  return ownerBudgetTiers(deps, `wrong-codes:${purpose}`, owner, WRONG_CODE_BUDGET, requester, identityId)
}

/**
 * Checks a code against the subject's open challenge. Refused outright while the identity's
 * wrong-code budget for this purpose (or the `budgetOwner`'s) is spent: no code verifies then, not
 * even the right one. Only guesses at a code that was sent spend it.
 * Right (and `accept`ed, e.g. the sign-up password matches): the challenge is consumed and its
 * unsent messages dead-lettered `challenge_consumed`. Wrong: one attempt and one unit of the
 * budget are spent; the last attempt kills the challenge and dead-letters its unsent messages too.
 * The caller commits either way, so a wrong guess is counted, and only then refuses.
 */
export async function checkCodeTx(
  trx: Knex.Transaction,
  deps: Pick<ChallengeDeps, 'codeHashKey' | 'codeHashKeys' | 'clock'>,
  subject: ChallengeSubject,
  code: string,
  options: { accept?: (challenge: ChallengeRow) => boolean; budgetOwner?: string; requester?: Requester } = {},
): Promise<CodeCheck> {
  const now = deps.clock()
  const tiers = wrongCodeTiers(
    deps,
    subject.purpose,
    options.budgetOwner ?? `identity:${subject.identityId}`,
    options.requester,
    subject.identityId,
  )
  const budgetRetryAfterSeconds = await tiersWait(trx, tiers, now)
  if (budgetRetryAfterSeconds !== undefined) return { kind: 'refused', budgetRetryAfterSeconds }
  const open = await lockOpenChallengeTx(trx, subject, now)
  if (!open) {
    // No code was sent to guess: a stranger's wrong codes must not lock the owner out, so they
    // spend a bucket nobody checks (the same write as a real guess, for the same commit).
    await budget.spendTx(trx, wrongCodeBucket(deps, subject.purpose, `no-challenge:${subject.loginIdentifierId}`), now)
    return { kind: 'refused' }
  }
  if (
    !/^\d{6}$/.test(code) ||
    !verifyCode(deps.codeHashKeys ?? deps.codeHashKey, open.id, code, open.code_hash) ||
    !(options.accept?.(open) ?? true)
  ) {
    await spendTiersTx(trx, tiers, now)
    if ((await spendAttemptTx(trx, open.id)) <= 0) await deadLetterChallengeMessagesTx(trx, open.id, 'challenge_consumed', now)
    return { kind: 'refused' }
  }
  await consumeChallengeTx(trx, open.id, now)
  await deadLetterChallengeMessagesTx(trx, open.id, 'challenge_consumed', now)
  return { kind: 'verified', challenge: open }
}

/**
 * Forgives the wrong codes the identity's sessions spent on the signed-in routes (step-up, adding a
 * sign-in method). Called when a recovery has just proved a verified identifier's mailbox — what a
 * step-up proves — and revoked every session: a thief's stolen session that spent the day's guesses
 * is gone, and must not keep the owner from stepping up for the rest of the day.
 */
export async function forgiveSignedInGuessesTx(
  trx: Knex.Transaction,
  deps: Pick<ChallengeDeps, 'codeHashKey' | 'codeHashKeys'>,
  identityId: string,
): Promise<void> {
  for (const purpose of ['step_up', 'add_sign_in_method'] as const)
    await clearBucketTx(trx, wrongCodeBucket(deps, purpose, `identity:${identityId}`))
}

/**
 * A code presented for an identifier nobody can be checked against: spends a unit of a budget kept
 * for the identifier itself, so the refusal writes and commits what a real wrong guess does.
 */
export async function refuseUnknownCodeTx(
  trx: Knex.Transaction,
  deps: Pick<ChallengeDeps, 'codeHashKey' | 'codeHashKeys' | 'clock'>,
  purpose: ChallengePurpose,
  identifier: Identifier,
  requester?: Requester,
): Promise<void> {
  const now = deps.clock()
  const tiers = wrongCodeTiers(deps, purpose, `identifier:${identifier.kind}:${canonicalDestination(identifier)}`, requester, undefined)
  // Spent when every tier has room, as a real wrong guess would be; refused, nothing is spent.
  await spendTiersTx(trx, tiers, now)
}
