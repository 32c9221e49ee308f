import { PURPOSES } from '../outbox/constants.ts'
import { canonicalDestination, type Identifier } from './identifiers.ts'
import { bucketKeys } from './secrets.ts'

type Keys = { codeHashKey: Buffer; codeHashKeys?: readonly Buffer[] }

/** What an erasure knows of a person to find their rate-limit buckets. */
export type PersonKeys = { identityId: string; identifiers: readonly (Identifier & { id: string })[]; deviceIds: readonly string[] }

// The budgets of one identity (limitIdentityTx's actions, the organization budgets of invitations.ts).
const IDENTITY_KINDS = [
  'identity:add_sign_in_method',
  'identity:step_up',
  'identity:password_change',
  'organization-creator',
  'invitation-inviter',
]
const CHALLENGE_PURPOSES = PURPOSES.filter(
  (purpose) => purpose !== 'invitation' && purpose !== 'security_notice' && purpose !== 'verification_code' && purpose !== 'magic_link',
)

/**
 * Every rate-limit bucket key that names the person (under every key of the ring): the budgets
 * owned by its identity, by each identifier's canonical destination and by each login identifier,
 * each as a ceiling and as the slice of each of its devices. A client's slice also names the
 * client's network, which is not kept anywhere, so those hits are not found; they leave with
 * their window (an hour at most, swept after a day: jobs/retention-sweep.ts).
 */
export function personBucketKeys(keys: Keys, person: PersonKeys): Buffer[] {
  const owned: [string, string][] = IDENTITY_KINDS.map((kind) => [kind, person.identityId])
  for (const purpose of CHALLENGE_PURPOSES) owned.push([`wrong-codes:${purpose}`, `identity:${person.identityId}`])
  for (const identifier of person.identifiers) {
    const canonical = canonicalDestination(identifier)
    owned.push([`destination:${identifier.kind}`, canonical], [`sign-in-failures:${identifier.kind}`, canonical])
    for (const purpose of CHALLENGE_PURPOSES) {
      owned.push([`wrong-codes:${purpose}`, `identifier:${identifier.kind}:${canonical}`])
      owned.push([`wrong-codes:${purpose}`, `no-challenge:${identifier.id}`])
    }
  }
  const suffixes = ['', ...person.deviceIds.map((id) => `|device:${id}`)]
  return owned.flatMap(([kind, owner]) => suffixes.flatMap((suffix) => bucketKeys(keys, kind, `${owner}${suffix}`)))
}
