import { createRequire } from 'node:module'
import { dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import express, { Router } from 'express'

const PUBLIC = fileURLToPath(new URL('../../public/', import.meta.url))

// Scripts and styles come from files of this origin only: no inline script or style, no other
// origin, no framing, no form posts, so an injected string can neither run nor exfiltrate.
const STRICT_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ')

function securityHeaders(csp: string): express.RequestHandler {
  return (_req, res, next) => {
    res.set({
      'Content-Security-Policy': csp,
      'X-Content-Type-Options': 'nosniff',
      'Referrer-Policy': 'no-referrer',
      'Cache-Control': 'no-store',
    })
    next()
  }
}

/** `/platform-admin/`: the operator console, a static page whose script calls the staff JSON routes. */
export function operatorConsole(): Router {
  const router = Router()
  router.use(securityHeaders(STRICT_CSP), express.static(`${PUBLIC}platform-admin`, { index: 'index.html', redirect: true }))
  return router
}

/** `/docs/`: Swagger UI from its npm package (no CDN) over `/openapi.json`. */
export function apiDocsPage(): Router {
  const router = Router()
  // Swagger UI sets style attributes from its script; everything else is as strict as the console.
  const csp = STRICT_CSP.replace("style-src 'self'", "style-src 'self' 'unsafe-inline'")
  const swagger = express.static(dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json')), { index: false })
  const swaggerFiles = new Set(['/swagger-ui-bundle.js', '/swagger-ui.css'])
  router.use(securityHeaders(csp), express.static(`${PUBLIC}docs`, { index: 'index.html', redirect: true }))
  // Only the two files the page loads, not the package's demo pages.
  router.use((req, res, next) => (swaggerFiles.has(req.path) ? swagger(req, res, next) : next()))
  return router
}
