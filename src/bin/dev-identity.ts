import { uuidv7 } from 'uuidv7'
import { ConfigError } from '../../config/schema.ts'
import { createKnex } from '../db/knex.ts'
import { insertActiveIdentityTx } from '../identity/identities-sql.ts'
import { parseIdentifier } from '../identity/identifiers.ts'
import { main } from './main.ts'
import { ownerDatabaseUrl } from './owner-database.ts'

/** `npm run dev:identity -- alice@example.com`: an active identity with a verified identifier. */
await main('cli', async (config) => {
  if (config.NODE_ENV === 'production' || config.NODE_ENV === 'staging') {
    throw new ConfigError([{ variable: 'NODE_ENV', problem: 'dev:identity is a development tool' }])
  }
  const raw = process.argv[2]
  const identifier = raw ? parseIdentifier(raw) : undefined
  if (!identifier) {
    console.error('usage: npm run dev:identity -- <email or +E164 phone>')
    process.exitCode = 2
    return
  }
  const databaseUrl = await ownerDatabaseUrl(config)
  const db = createKnex(databaseUrl, { applicationName: 'sealpost-dev-identity', max: 1 })
  try {
    const created = await db.transaction(async (trx) => {
      const existing = await trx('identity.login_identifiers').where({ kind: identifier.kind, value: identifier.value }).first()
      if (existing) return false
      await insertActiveIdentityTx(trx, { identityId: uuidv7(), loginIdentifierId: uuidv7() }, identifier, new Date())
      return true
    })
    // Already there is what was asked for: a verified identity with that identifier (it may have a password).
    console.log(
      created ? `created a verified ${identifier.kind} identity` : `that ${identifier.kind} already has an identity: nothing changed`,
    )
  } finally {
    await db.destroy()
  }
})
