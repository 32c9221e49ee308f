import { writeFile } from 'node:fs/promises'
import { configurationDoc } from '../providers/config.ts'

/** `npm run docs:configuration`: writes docs/configuration.md from the core schema and every provider's settings slice. */
await writeFile(new URL('../../docs/configuration.md', import.meta.url), configurationDoc())
