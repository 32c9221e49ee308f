import { readFile, writeFile } from 'node:fs/promises'
import { withFaultTable } from '../providers/fault-doc.ts'

/** `npm run docs:faults`: rewrites the fault table of docs/delivery.md from src/providers/faults.ts and each provider's answers. */
const page = new URL('../../docs/delivery.md', import.meta.url)
await writeFile(page, withFaultTable(await readFile(page, 'utf8')))
