import { spawn } from 'node:child_process'
import { readFile, rm } from 'node:fs/promises'
import { expect } from 'chai'
import { freshDataDir, killGroup, npmStart, stopNpmStart, type NpmStart } from './support/npm-start.ts'
import { terminalPath } from './support/processes.ts'

/** The fenced blocks of one language on a page, in order: what a reader pastes into one terminal. */
async function blocks(file: string, language = 'sh'): Promise<string[]> {
  const markdown = await readFile(file, 'utf8')
  return [...markdown.matchAll(new RegExp(`^\`\`\`${language}\\n([\\s\\S]*?)^\`\`\`$`, 'gm'))].map((match) => match[1]!)
}

/** The shell blocks of a section of a page (from its heading to the next one). */
async function sectionBlocks(file: string, heading: string): Promise<string[]> {
  const markdown = await readFile(file, 'utf8')
  const start = markdown.indexOf(`\n${heading}\n`)
  expect(start, `${file} has "${heading}"`).to.be.above(-1)
  const end = markdown.indexOf('\n## ', start + heading.length + 2)
  return [...markdown.slice(start, end < 0 ? undefined : end).matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((match) => match[1]!)
}

/** One terminal: bash with the reader's PATH (the machine's own `node`), every block in order, stopping at the first failure. */
function runTerminal(script: string[], env: NodeJS.ProcessEnv): Promise<{ status: number | null; output: string }> {
  return new Promise((resolve) => {
    const bash = spawn('bash', ['-c', ['set -euo pipefail', ...script].join('\n')], { env, stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    bash.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')))
    bash.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')))
    bash.on('close', (status) => resolve({ status, output }))
  })
}

/** What `npm start` printed for people (not the JSON log lines), with this run's ports put back to the defaults the page shows. */
function banner(run: NpmStart): string {
  const lines = run.app.output().split('\n')
  const first = lines.findIndex((line) => line.startsWith('Sealpost API on '))
  const last = lines.findIndex((line) => line.startsWith('Try: '))
  return lines
    .slice(first, last + 1)
    .filter((line) => !line.startsWith('{'))
    .join('\n')
    .replaceAll(`:${new URL(run.apiUrl).port}`, ':3000')
    .replaceAll(`:${new URL(run.inboxUrl).port}`, ':8005')
}

describe("the first hour: the banner's tip, README's \"Try it\", docs/getting-started.md and the pages' examples on one npm start and one data folder", function () {
  this.timeout(300_000)
  let dataDir: string
  let run: NpmStart
  const pages: Record<string, string[]> = {}
  before(async () => {
    dataDir = await freshDataDir('sealpost-first-hour-')
    run = await npmStart(dataDir)
    const guide = await blocks('docs/getting-started.md')
    expect(guide.length, 'the walkthrough has its steps').to.be.greaterThan(10)
    const tip = /^Try: (npm run .+?), then/m.exec(run.app.output())
    expect(tip, 'the banner has a tip to run').to.not.equal(null)
    pages.tip = [tip![1]!]
    pages.readme = await sectionBlocks('README.md', '## Try it')
    pages.guide = guide
    // courier.md asks for the guide's Helpers block first (`call`, `code`, `field`).
    pages.courier = [guide[0]!, ...(await blocks('docs/courier.md'))]
    pages.privacy = await blocks('docs/privacy.md')
  })
  after(async () => {
    if (run) await stopNpmStart(run.app, dataDir)
    await rm(dataDir, { recursive: true, force: true })
  })

  const terminal = (order: string[]) =>
    runTerminal(
      order.flatMap((name) => pages[name]!),
      { PATH: terminalPath(), HOME: process.env.HOME, SEALPOST_DATA_DIR: dataDir, API: run.apiUrl, INBOX: run.inboxUrl },
    )
  const expectEveryPage = (output: string) => {
    expect(output, "README's sign-up").to.match(/\{"challengeExpiresAt":"[^"]+"\} 202/)
    expect(output, "README's confirmation").to.match(/\{"token":"[^"]+","expiresAt":"[^"]+"\} 201/)
    expect(output, 'the guide').to.match(/reissues → 201/)
    expect(output, 'the guide').to.include('POST /password-recoveries/completion → 204')
    expect(output, "courier.md's message, as its key sees it").to.include('"maskedDestination":"a•••a@e•••.com"')
    expect(output, "privacy.md's erasure").to.match(/"tombstoneId": "[0-9a-f-]{36}"/)
  }

  it('prints the banner docs/getting-started.md shows, line for line', async () => {
    const [shown] = await blocks('docs/getting-started.md', 'text')
    expect(banner(run)).to.equal(shown!.trimEnd())
  })

  it('runs them one after the other in one terminal: the tip, the README, the guide, courier.md, privacy.md', async () => {
    const { status, output } = await terminal(['tip', 'readme', 'guide', 'courier', 'privacy'])
    expect(status, output.slice(-3000)).to.equal(0)
    expect(output).to.include('created a verified email identity')
    expectEveryPage(output)
  })

  it('runs them all again in the opposite order after Ctrl-C and a restart on the same data folder', async () => {
    killGroup(run.app, 'SIGINT')
    expect(await run.app.exited, 'Ctrl-C stops npm start cleanly').to.equal(0)
    run = await npmStart(dataDir)
    const { status, output } = await terminal(['privacy', 'courier', 'guide', 'readme', 'tip'])
    expect(status, output.slice(-3000)).to.equal(0)
    // The tip's identity is there from the first run: said so, and not a failure.
    expect(output).to.include('already has an identity: nothing changed')
    expectEveryPage(output)
  })
})
