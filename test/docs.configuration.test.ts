import { expect } from 'chai'
import { readFile } from 'node:fs/promises'
import { configurationDoc, envSchema } from '../src/providers/config.ts'
import { PROVIDERS } from '../src/providers/registry.ts'

describe('docs/configuration.md', () => {
  it("is what the core schema and every provider's settings slice generate (run npm run docs:configuration after changing them)", async () => {
    expect(await readFile('docs/configuration.md', 'utf8')).to.equal(configurationDoc())
  })

  it('names every variable of the schema, with its default', () => {
    const page = configurationDoc()
    for (const name of Object.keys(envSchema.shape)) expect(page, name).to.match(new RegExp(`^\\| \`${name}\` \\|`, 'm'))
    expect(page).to.include('| `RETRY_SCHEDULE` | text | `5s,30s,2m,10m,30m` |')
  })

  it('has one table per registered provider, listing exactly its slice of the schema', () => {
    const page = configurationDoc()
    for (const provider of PROVIDERS) {
      const start = page.indexOf(`## ${provider.title}\n`)
      expect(start, provider.id).to.be.above(0)
      const table = page.slice(start, page.indexOf('\n## ', start + 1))
      const rows = [...table.matchAll(/^\| `([A-Z_0-9]+)` \|/gm)].map((match) => match[1])
      expect(rows, provider.id).to.deep.equal(Object.keys(provider.settings.shape))
    }
  })
})
