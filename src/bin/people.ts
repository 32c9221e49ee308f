import { userInfo } from 'node:os'
import { ringKeys } from '../crypto/key-ring.ts'
import { createKnex } from '../db/knex.ts'
import { parseIdentifier } from '../identity/identifiers.ts'
import { erasePersonAsOwner, exportPersonAsOwner } from '../platform/people.ts'
import { ConflictError } from '../identity/errors.ts'
import { ensureDevKeys } from '../runtime/dev-keys.ts'
import { main } from './main.ts'
import { ownerDatabaseUrl } from './owner-database.ts'

/**
 * `npm run --silent people -- export|erase <identifier>` (as the owner; docs/privacy.md): prints the
 * export as JSON, or erases the person in one transaction and prints the tombstone id and counts.
 * Both are audited with the operator's login as the actor.
 */
await main('cli', async (config) => {
  const [action, raw] = process.argv.slice(2)
  const identifier = raw ? parseIdentifier(raw) : undefined
  if ((action !== 'export' && action !== 'erase') || !identifier) {
    console.error('usage: npm run --silent people -- export|erase <email or +E164 phone>')
    process.exitCode = 2
    return
  }
  // The keyed hashes that name the person need CODE_HASH_KEYS (in development, the generated keys).
  const codeHashKeys = config.CODE_HASH_KEYS
    ? ringKeys(config.CODE_HASH_KEYS)
    : (await ensureDevKeys(config.SEALPOST_DATA_DIR)).codeHashKeys
  const deps = { codeHashKey: codeHashKeys[0]!, codeHashKeys, clock: () => new Date() }
  const db = createKnex(await ownerDatabaseUrl(config), { applicationName: 'sealpost-people-cli', max: 1 })
  try {
    const actor = `cli:${userInfo().username}`
    const result = await (
      action === 'export' ? exportPersonAsOwner(db, deps, identifier, actor) : erasePersonAsOwner(db, deps, identifier, actor)
    ).catch((error: unknown) => {
      if (!(error instanceof ConflictError)) throw error
      console.error(`refused (${error.code}): ${error.message}`)
      process.exitCode = 1
      return null
    })
    if (result === null) return
    if (!result) {
      console.error('no identity has that identifier')
      process.exitCode = 1
      return
    }
    console.log(JSON.stringify(result, null, 2))
  } finally {
    await db.destroy()
  }
})
