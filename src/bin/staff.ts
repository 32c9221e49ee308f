import { userInfo } from 'node:os'
import { createKnex } from '../db/knex.ts'
import { parseIdentifier } from '../identity/identifiers.ts'
import { changeStaff } from '../platform/staff.ts'
import { main } from './main.ts'
import { ownerDatabaseUrl } from './owner-database.ts'

/** `npm run staff -- grant|revoke <identifier>`: as the owner, with an audit record naming the operator. */
await main('cli', async (config) => {
  const [action, raw] = process.argv.slice(2)
  const identifier = raw ? parseIdentifier(raw) : undefined
  if ((action !== 'grant' && action !== 'revoke') || !identifier) {
    console.error('usage: npm run staff -- grant|revoke <verified email or +E164 phone>')
    process.exitCode = 2
    return
  }
  const db = createKnex(await ownerDatabaseUrl(config), { applicationName: 'sealpost-staff-cli', max: 1 })
  try {
    const changed = await changeStaff(db, action, identifier, `cli:${userInfo().username}`, new Date())
    const said = {
      granted: 'granted: that identity is staff now',
      revoked: 'revoked: that identity is no longer staff',
      unchanged: `nothing to ${action}: already so`,
    }
    if (changed === 'no_such_identity') {
      console.error('no identity has that verified identifier: sign up with it and confirm the code first')
      process.exitCode = 1
      return
    }
    console.log(said[changed])
  } finally {
    await db.destroy()
  }
})
