import { writeFile } from 'node:fs/promises'
import { configurationPage } from '../../config/configuration-doc.ts'

/** `npm run docs:configuration`: writes docs/configuration.md from config/schema.ts and config/variables.ts. */
await writeFile(new URL('../../docs/configuration.md', import.meta.url), configurationPage())
