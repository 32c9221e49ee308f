import type { RequestHandler, Response } from 'express'
import { LOCALES, type Locale } from '../delivery/locales.ts'

/**
 * The shipped locale an `Accept-Language` header (RFC 9110 §12.5.4) prefers most: ranges by
 * q-value (ties in header order), each matched exactly or by its primary subtag (`de-AT` → `de`);
 * `*`, q=0, nothing matching, or no header → the fallback. Pure, table-tested.
 */
export function negotiateLocale(header: string | undefined, fallback: Locale): Locale {
  if (!header) return fallback
  const ranges = header
    .split(',')
    .slice(0, 20)
    .map((part, index) => {
      const [range = '', ...params] = part.trim().split(';')
      const q = params.map((param) => /^\s*q\s*=\s*([01](?:\.\d{0,3})?)\s*$/i.exec(param)?.[1]).find((value) => value !== undefined)
      return { range: range.trim().toLowerCase(), q: q === undefined ? 1 : Number(q), index }
    })
  ranges.sort((a, b) => b.q - a.q || a.index - b.index)
  for (const { range, q } of ranges) {
    if (q <= 0 || range === '*') continue
    const primary = range.split('-')[0]
    const match = LOCALES.find((locale) => locale === range || locale === primary)
    if (match) return match
  }
  return fallback
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
