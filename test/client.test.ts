import { expect } from 'chai'
import { execFile } from 'node:child_process'
import { readFile } from 'node:fs/promises'
import { promisify } from 'node:util'
import { SCHEMA_FILE, clientSchemaSource } from '../client/generate.ts'
import { useWebStack } from './support/web-stack.ts'

const root = new URL('../', import.meta.url)

describe('the typed client (client/)', () => {
  const f = useWebStack({ worker: false })

  it('ships exactly the types the API document generates (run `npm run client:generate` after changing a route)', async () => {
    expect(await readFile(SCHEMA_FILE, 'utf8')).to.equal(await clientSchemaSource())
  })

  it('runs the usage example docs/api.md shows against a live server', async () => {
    const page = await readFile(new URL('docs/api.md', root), 'utf8')
    const example = await readFile(new URL('client/example.ts', root), 'utf8')
    expect(page, 'docs/api.md shows client/example.ts verbatim').to.include('```ts\n' + example + '```')
    const { stdout } = await promisify(execFile)(process.execPath, ['client/example.ts'], {
      cwd: root,
      env: { ...process.env, SEALPOST_URL: f.stack.web.url },
      timeout: 20_000,
    })
    const lines = stdout.trim().split('\n')
    expect(lines[0]).to.match(/^a code is on its way; it expires at \d{4}-\d\d-\d\dT/)
    expect(lines.slice(1)).to.deep.equal(['sign-in refused: 401 invalid_credentials', 'sign-out without a session: 401 unauthenticated'])
  })
})
