import type { Bucket, OwnerBudget, Tier } from './rate-limits.ts'
import { bucketKeys } from './secrets.ts'

/** A device cookie's trust: the client signed in (or confirmed a sign-up) as this identity before. */
export type TrustedDevice = { id: string; identityId: string }

/**
 * Who is asking, as far as a budget cares: the client's network as the router reports it
 * (`clientOf` in src/http/client-address.ts) and, when the client sent a live device cookie, the
 * device it names.
 */
export type Requester = { client: string; device?: TrustedDevice }

type Keys = { codeHashKey: Buffer; codeHashKeys?: readonly Buffer[] }

/**
 * The tiers a request spends of the budget `kind` of `owner` (an identifier, an identity): the
 * device's own when the client signed in before as `identityId` (the account the budget protects),
 * else its client's slice, then the ceiling. The ceiling's bucket is the one the budget had when it
 * was a single window, so hits counted before an upgrade (or by a web of the previous release
 * beside this one) still count. Whether `identityId` is known changes the tiers only for a client
 * holding that identity's own device cookie: anyone else takes the anonymous tiers either way.
 */
export function ownerBudgetTiers(
  keys: Keys,
  kind: string,
  owner: string,
  budget: OwnerBudget,
  requester: Requester,
  identityId: string | undefined,
): Tier[] {
  const bucket = (suffix: string): Bucket => bucketKeys(keys, kind, `${owner}${suffix}`)
  if (requester.device && identityId !== undefined && requester.device.identityId === identityId)
    return [{ bucket: bucket(`|device:${requester.device.id}`), limit: budget.perDevice }]
  return [
    { bucket: bucket(`|client:${requester.client}`), limit: budget.perClient },
    { bucket: bucket(''), limit: budget.ceiling },
  ]
}

/** The requester of work no client started (tests, the CLI): a client of its own, trusted nowhere. */
export const INTERNAL_REQUESTER: Requester = Object.freeze({ client: 'internal' })
