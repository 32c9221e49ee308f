import express, { type Request, type RequestHandler, type Response } from 'express'
import { isLocale, LOCALES, type Locale } from '../delivery/locales.ts'

/**
 * The longest Accept-Language this server reads: a browser's runs well under 100 characters, and
 * negotiation costs grow with the ranges times the shipped locales, so a hostile header is cut at
 * its last whole range within this length before it is read.
 */
const MAX_ACCEPT_LANGUAGE = 256

function boundedHeader(header: string): string {
  if (header.length <= MAX_ACCEPT_LANGUAGE) return header
  const head = header.slice(0, MAX_ACCEPT_LANGUAGE)
  return head.slice(0, Math.max(0, head.lastIndexOf(',')))
}

/**
 * The shipped locale an `Accept-Language` header (RFC 9110 §12.5.4) prefers most, as Express's
 * `req.acceptsLanguages` (negotiator) decides it: q-values, then the most specific match (`de-AT`
 * → `de`); `*`, q=0, nothing matching, or no header → the fallback (offered first, so `*` picks it).
 * Pure: the header is read from a request of its own, table-tested.
 */
export function negotiateLocale(header: string | undefined, fallback: Locale): Locale {
  const request = { headers: header === undefined ? {} : { 'accept-language': boundedHeader(header) } } as Request
  const offered = [fallback, ...LOCALES.filter((locale) => locale !== fallback)]
  const chosen = express.request.acceptsLanguages.call(request, ...offered)
  return chosen !== false && isLocale(chosen) ? chosen : fallback
}

/** Puts the request's locale on `res.locals` for the routes that enqueue a message. */
export function negotiatedLocale(fallback: Locale): RequestHandler {
  return (req, res, next) => {
    res.locals.locale = negotiateLocale(req.get('accept-language'), fallback)
    next()
  }
}

export function localeOf(res: Response): Locale {
  return (res.locals.locale as Locale | undefined) ?? 'en'
}

/** The use case's dependencies with this request's locale, which the enqueue stores on the message. */
export function localized<T extends object>(deps: T, res: Response): T & { locale: Locale } {
  return { ...deps, locale: localeOf(res) }
}
