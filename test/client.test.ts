import { expect } from 'chai'
import { execFile } from 'node:child_process'
import { readFile } from 'node:fs/promises'
import { promisify } from 'node:util'
import { SCHEMA_FILE, clientSchemaSource } from '../client/generate.ts'
import { terminalPath } from './support/processes.ts'
import { useWebStack } from './support/web-stack.ts'

const root = new URL('../', import.meta.url)

describe('the typed client (client/)', () => {
  const f = useWebStack({ worker: false })

  it('ships exactly the types the API document generates (run `npm run client:generate` after changing a route)', async () => {
    expect(await readFile(SCHEMA_FILE, 'utf8')).to.equal(await clientSchemaSource())
  })

  it("runs the usage example docs/api.md shows, with the command it gives, from a terminal whose node is not the project's", async () => {
    const page = await readFile(new URL('docs/api.md', root), 'utf8')
    const example = await readFile(new URL('client/example.ts', root), 'utf8')
    expect(page, 'docs/api.md shows client/example.ts verbatim').to.include('```ts\n' + example + '```')
    expect(page, 'docs/api.md gives the command').to.include('`SEALPOST_URL=http://127.0.0.1:3000 npm run client:example`')
    const { stdout } = await promisify(execFile)('npm', ['run', '--silent', 'client:example'], {
      cwd: root,
      env: { ...process.env, PATH: terminalPath(), SEALPOST_URL: f.stack.web.url },
      timeout: 30_000,
    })
    const lines = stdout.trim().split('\n')
    expect(lines[0]).to.match(/^a code is on its way; it expires at \d{4}-\d\d-\d\dT/)
    expect(lines.slice(1)).to.deep.equal(['sign-in refused: 401 invalid_credentials', 'sign-out without a session: 401 unauthenticated'])
  })
})
