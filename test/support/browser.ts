import { expect } from 'chai'
import { existsSync } from 'node:fs'
import { mkdir, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium, type BrowserContext, type Page } from 'playwright-core'

/** Where browser tests leave their screenshots (git-ignored). */
export const SCREENSHOTS = join(import.meta.dirname, '..', '..', 'test-artifacts', 'screenshots')

const CHROMIUM = '/usr/bin/chromium'
/** The window the console is designed for (and every screenshot is taken in). */
const WINDOW = { width: 1280, height: 900 }
// Debian's chromium, no network of its own, a profile nobody used before.
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]

/** Headless Chromium from the distribution (`.ci/run` installs it) with a fresh user-data dir. */
export async function launchChromium(): Promise<{
  context: BrowserContext
  page: Page
  problems: string[]
  shot: (name: string) => Promise<void>
  close: () => Promise<void>
}> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get update && apt-get install -y chromium (.ci/run does this)`)
  const userDataDir = await mkdtemp(join(tmpdir(), 'sealpost-chromium-'))
  await mkdir(SCREENSHOTS, { recursive: true })
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    viewport: WINDOW,
  })
  const page = context.pages()[0] ?? (await context.newPage())
  // Anything the page complains about (a CSP refusal, a script error) fails the test that reads it.
  const problems: string[] = []
  // (A refused API call is logged as "Failed to load resource"; the console expects those.)
  page.on('console', (message) => {
    if (message.type() === 'error' && !message.text().startsWith('Failed to load resource')) problems.push(message.text())
  })
  page.on('pageerror', (error) => problems.push(`${error.name}: ${error.message}`))
  return {
    context,
    page,
    problems,
    shot: async (name) => {
      await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true })
      // An operator's laptop window: the console never scrolls sideways in it.
      const width = await page.evaluate<number>('document.documentElement.scrollWidth')
      // Names the widest culprit (the innermost element past the window's edge), so a failure says where to look.
      const culprit =
        width > WINDOW.width
          ? await page.evaluate<string>(
              `[...document.querySelectorAll('body *')].filter((e) => e.getBoundingClientRect().right > ${WINDOW.width} && ![...e.children].some((c) => c.getBoundingClientRect().right > ${WINDOW.width})).map((e) => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className ? '.' + e.className : '') + ' in ' + (e.closest('[id]')?.id ?? '?')).slice(0, 3).join(', ')`,
            )
          : ''
      expect(width, `${name}: the page is wider than the ${WINDOW.width} px window (${culprit})`).to.be.at.most(WINDOW.width)
    },
    close: async () => {
      await context.close()
      await rm(userDataDir, { recursive: true, force: true })
    },
  }
}
