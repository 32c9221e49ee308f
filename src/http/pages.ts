import { createRequire } from 'node:module'
import { dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import express, { Router } from 'express'
import helmet from 'helmet'
import { PHONE_INBOX_PATH, phoneInboxPage, type PhoneInboxSource } from './phone-inbox-page.ts'

const PUBLIC = fileURLToPath(new URL('../../public/', import.meta.url))

// Scripts and styles come from files of this origin only: no inline script or style, no other
// origin, no framing, no form posts, so an injected string can neither run nor exfiltrate.
const STRICT_DIRECTIVES = {
  defaultSrc: ["'none'"],
  scriptSrc: ["'self'"],
  styleSrc: ["'self'"],
  imgSrc: ["'self'", 'data:'],
  connectSrc: ["'self'"],
  fontSrc: ["'self'"],
  baseUri: ["'none'"],
  formAction: ["'none'"],
  frameAncestors: ["'none'"],
}

/**
 * A page's CSP through helmet's directives (none of helmet's defaults: the page names every source
 * it allows), over the app's helmet() headers; a page is never stored by a cache.
 */
function pageHeaders(directives: typeof STRICT_DIRECTIVES): express.RequestHandler {
  const csp = helmet.contentSecurityPolicy({ useDefaults: false, directives })
  return (req, res, next) => {
    res.set({ 'X-Content-Type-Options': 'nosniff', 'Referrer-Policy': 'no-referrer', 'Cache-Control': 'no-store' })
    csp(req, res, next)
  }
}

/** `/platform-admin/`: the operator console, a static page whose script calls the staff JSON routes. */
export function operatorConsole(): Router {
  const router = Router()
  router.use(pageHeaders(STRICT_DIRECTIVES), express.static(`${PUBLIC}platform-admin`, { index: 'index.html', redirect: true }))
  return router
}

/** `/docs/`: Swagger UI from its npm package (no CDN) over `/openapi.json`. */
export function apiDocsPage(): Router {
  const router = Router()
  // Swagger UI sets style attributes from its script; everything else is as strict as the console.
  const directives = { ...STRICT_DIRECTIVES, styleSrc: ["'self'", "'unsafe-inline'"] }
  const swagger = express.static(dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json')), { index: false })
  const swaggerFiles = new Set(['/swagger-ui-bundle.js', '/swagger-ui.css'])
  router.use(pageHeaders(directives), express.static(`${PUBLIC}docs`, { index: 'index.html', redirect: true }))
  // Only the two files the page loads, not the package's demo pages.
  router.use((req, res, next) => (swaggerFiles.has(req.path) ? swagger(req, res, next) : next()))
  return router
}

export type DevelopmentPages = {
  inboxUrl: string | null
  apiDocs: boolean
  /** What the local phone fakes accepted: the phone inbox page beside the SES emulator's. */
  phoneInbox?: PhoneInboxSource
}

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (char) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[char]!)

function developmentIndex({ inboxUrl, apiDocs, phoneInbox }: DevelopmentPages): string {
  const links = [
    apiDocs ? ['/docs/', 'API reference (Swagger UI)'] : undefined,
    ['/platform-admin/', 'Operator console (staff: npm run staff -- grant <identifier>)'],
    inboxUrl ? [inboxUrl, 'Local inbox of the SES emulator (every email this run sends)'] : undefined,
    phoneInbox ? [PHONE_INBOX_PATH, 'Phone inbox (every SMS and WhatsApp message the local fakes accepted)'] : undefined,
    ['/openapi.json', 'The OpenAPI document'],
  ].filter((link) => link !== undefined)
  const items = links.map(([href, text]) => `<li><a href="${escapeHtml(href!)}">${escapeHtml(text!)}</a></li>`).join('\n      ')
  return `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Sealpost (development)</title>
  <meta name="viewport" content="width=device-width, initial-scale=1">
</head>
<body>
  <main>
    <h1>Sealpost, running in development</h1>
    <p>An API without a front end of its own; README.md "Try it" walks through it.</p>
    <ul>
      ${items}
    </ul>
  </main>
</body>
</html>
`
}

/**
 * `npm start` only: `/` links what a newcomer looks for, and `/join` explains the invitation link,
 * whose default base in development is this server (in production it is the product's own page).
 * `/join` is a static page without script: it neither reads nor echoes the token in the fragment.
 */
export function developmentPages(pages: DevelopmentPages): Router {
  const router = Router()
  const index = developmentIndex(pages)
  router.get('/', pageHeaders(STRICT_DIRECTIVES), (_req, res) => {
    res.type('html').send(index)
  })
  router.get('/join', pageHeaders(STRICT_DIRECTIVES), (_req, res) => {
    res.sendFile(`${PUBLIC}dev/join.html`)
  })
  if (pages.phoneInbox) router.use(phoneInboxPage(pages.phoneInbox, pageHeaders(STRICT_DIRECTIVES)))
  return router
}
