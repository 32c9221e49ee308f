import type { Knex } from 'knex'
import { channelFor, type Identifier } from '../identity/identifiers.ts'
import { requireElevationTx } from '../identity/elevation.ts'
import { ConflictError, NotFoundError } from '../identity/errors.ts'
import { personBucketKeys } from '../identity/person-buckets.ts'
import { destinationHmac } from '../outbox/destination.ts'
import type { StaffSession } from './outbox-admin.ts'
import { erasePersonCore, erasePersonTx, exportPersonCore, exportPersonTx, findPerson, type ErasureInput } from './people-sql.ts'
import { insertAuditRecordTx } from './staff-sql.ts'

/** The keys the person's keyed hashes are made with: the code-hash key ring. */
export type PeopleDeps = { codeHashKey: Buffer; codeHashKeys?: readonly Buffer[]; clock: () => Date }

/** What an erasure answers: the random id that stands for the person from now on, and what went. */
export type Erased = { tombstoneId: string; erased: Record<string, number> }

const notFound = () => new NotFoundError('person_not_found', 'No identity has that identifier.')

const REFUSALS = {
  own_identity: 'Staff cannot erase their own identity; another staff member can.',
  staff_member: 'A staff member is erased by the owner (npm run people -- erase), after npm run staff -- revoke.',
  sole_admin: 'The person is the only admin of an organization that has other members: make another member admin first.',
} as const

const refusalError = (refusal: keyof typeof REFUSALS) => new ConflictError(refusal, REFUSALS[refusal])

/** The person behind an identifier with the keyed hashes that name them (destinations under every key, rate-limit buckets). */
async function locate(db: Knex, deps: PeopleDeps, identifier: Identifier) {
  const person = await findPerson(db, identifier)
  if (!person) return undefined
  const ring = deps.codeHashKeys ?? [deps.codeHashKey]
  // Only verified identifiers name the person: an unconfirmed claim may be someone else's address,
  // whose messages, suppressions and budgets are theirs.
  const own = { ...person, identifiers: person.identifiers.filter((known) => known.verified) }
  const destinationHmacs = own.identifiers.flatMap((known) => ring.map((key) => destinationHmac(key, channelFor(known), known.value)))
  return { ...person, destinationHmacs, bucketKeys: personBucketKeys(deps, own) }
}

/**
 * Staff erasure (step-up, audited): one transaction checks the elevation, then
 * `platform.erase_person` erases everything of the person (docs/privacy.md). A staff member
 * cannot erase themselves (their own session would go with it): `own_identity`; nor another staff
 * member, whom only the owner grants, revokes and erases: `staff_member`. Nobody erases the last
 * admin of an organization with other members: `sole_admin`.
 */
export async function erasePersonAsStaff(
  db: Knex,
  deps: PeopleDeps,
  input: { staff: StaffSession; elevationToken: string | undefined; identifier: Identifier },
): Promise<Erased> {
  const now = deps.clock()
  return await db.transaction(async (trx) => {
    await requireElevationTx(trx, input.staff, input.elevationToken, now)
    const person = await locate(trx, deps, input.identifier)
    if (!person) throw notFound()
    const erased = await erasePersonTx(trx, input.staff.tokenHash, erasureInput(person, now))
    if (erased === null) throw notFound()
    if ('refusal' in erased) throw refusalError(erased.refusal)
    return erased
  })
}

/** Staff export (step-up, audited as `identity.exported`): what is held about the person, no secret. */
export async function exportPersonAsStaff(
  db: Knex,
  deps: PeopleDeps,
  input: { staff: StaffSession; elevationToken: string | undefined; identifier: Identifier },
): Promise<Record<string, unknown>> {
  const now = deps.clock()
  return await db.transaction(async (trx) => {
    await requireElevationTx(trx, input.staff, input.elevationToken, now)
    const person = await locate(trx, deps, input.identifier)
    const exported = person ? await exportPersonTx(trx, input.staff.tokenHash, { ...person, now }) : null
    if (!exported) throw notFound()
    return exported
  })
}

/** `npm run people -- erase <identifier>` (the owner): the same erasure, the operator's login as the actor. */
export async function erasePersonAsOwner(db: Knex, deps: PeopleDeps, identifier: Identifier, actor: string): Promise<Erased | undefined> {
  const person = await locate(db, deps, identifier)
  if (!person) return undefined
  const erased = await erasePersonCore(db, actor, erasureInput(person, deps.clock()))
  if (erased && 'refusal' in erased) throw refusalError(erased.refusal)
  return erased ?? undefined
}

/** `npm run people -- export <identifier>` (the owner): the export and its audit record, in one transaction. */
export async function exportPersonAsOwner(
  db: Knex,
  deps: PeopleDeps,
  identifier: Identifier,
  actor: string,
): Promise<Record<string, unknown> | undefined> {
  return await db.transaction(async (trx) => {
    const person = await locate(trx, deps, identifier)
    const exported = person ? await exportPersonCore(trx, person) : null
    if (!person || !exported) return undefined
    await insertAuditRecordTx(trx, { actor, action: 'identity.exported', subject: person.identityId }, deps.clock())
    return exported
  })
}

function erasureInput(person: { identityId: string; destinationHmacs: Buffer[]; bucketKeys: Buffer[] }, now: Date): ErasureInput {
  return { identityId: person.identityId, destinationHmacs: person.destinationHmacs, bucketKeys: person.bucketKeys, now }
}
