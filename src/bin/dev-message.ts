import { ConfigError } from '../../config/schema.ts'
import { createKnex } from '../db/knex.ts'
import { latestPublishedMessageTo } from '../outbox/attempts-sql.ts'
import { main } from './main.ts'
import { ownerDatabaseUrl } from './owner-database.ts'

/**
 * `npm run --silent dev:message -- <address>`: prints the id of the newest published message to that
 * address in the development database (what `npm run dev:ses-event` and the staff routes take).
 */
await main('cli', async (config) => {
  if (config.NODE_ENV === 'production' || config.NODE_ENV === 'staging') {
    throw new ConfigError([{ variable: 'NODE_ENV', problem: 'dev:message is a development tool' }])
  }
  const [destination] = process.argv.slice(2)
  if (!destination) {
    console.error('usage: npm run --silent dev:message -- <address>')
    process.exitCode = 2
    return
  }
  const db = createKnex(await ownerDatabaseUrl(config), { applicationName: 'sealpost-dev-message', max: 1 })
  try {
    const id = await latestPublishedMessageTo(db, destination)
    if (!id) {
      console.error('no published message to that address (is it sent yet?)')
      process.exitCode = 1
      return
    }
    console.log(id)
  } finally {
    await db.destroy()
  }
})
