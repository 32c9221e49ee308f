import { expect } from 'chai'
import { readFile } from 'node:fs/promises'
import { configurationPage } from '../config/configuration-doc.ts'
import { envSchema } from '../config/schema.ts'

describe('docs/configuration.md', () => {
  it('is what config/schema.ts and config/variables.ts generate (run npm run docs:configuration after changing them)', async () => {
    expect(await readFile('docs/configuration.md', 'utf8')).to.equal(configurationPage())
  })

  it('names every variable of the schema, with its default', () => {
    const page = configurationPage()
    for (const name of Object.keys(envSchema.shape)) expect(page, name).to.match(new RegExp(`^\\| \`${name}\` \\|`, 'm'))
    expect(page).to.include('| `RETRY_SCHEDULE` | text | `5s,30s,2m,10m,30m` |')
  })
})
