import { release } from '../db/release.ts'
import { main, required } from './main.ts'

await main('release', async (config, logger) => {
  await release(required(config.DATABASE_URL, 'DATABASE_URL', 'the release step runs as the database owner'), config, logger)
})
