import { randomBytes } from 'node:crypto'
import Handlebars from 'handlebars'
import { plainText } from './plain-text.ts'

/** A rendered message as src/delivery/templates.ts gives it: the subject and text, HTML for email. */
type Rendering = { subject: string; text: string; html?: string }
type Parts = { subject: string[]; text: string[]; html?: string[] }

/**
 * Codes a reused rendering must give exactly as a whole one: every character Handlebars escapes and
 * one `plainText` replaces (the code unescaped or through a helper shows), a plain six-digit code
 * (a catalog formatting it as a number shows), and none at all (a template branching on it shows).
 */
const PROBE_CODES = ['<a&b"c\'d`e=f>\u0007 0123456789', '482913', '']

/** The code put in a split rendering's gaps, with the treatment Handlebars gives a value (`plainText`; escaped in HTML). */
function fromSplit(parts: Parts, code: string): Rendering {
  const text = plainText(code)
  return {
    subject: parts.subject.join(text),
    text: parts.text.join(text),
    ...(parts.html ? { html: parts.html.join(Handlebars.escapeExpression(text)) } : {}),
  }
}

const sameRendering = (a: Rendering, b: Rendering) => a.subject === b.subject && a.text === b.text && a.html === b.html

/**
 * A code message reads the same for everyone but its code: each key (template, locale, minutes,
 * days) is rendered once with a random marker where the code goes, and a message's code is put in
 * the marker's place (`fromSplit`). No rendered code is kept. Where that treatment would not give
 * what the template gives (the code through a helper, unescaped, or transformed), checked on probe
 * codes at a key's first use, that key renders whole every time.
 */
export function codeRenderings(): (key: string, code: string, renderWhole: (code: string) => Rendering) => Rendering {
  const marker = randomBytes(16).toString('hex')
  const split = new Map<string, Parts | null>()
  return (key, code, renderWhole) => {
    let parts = split.get(key)
    if (parts === undefined) {
      const marked = renderWhole(marker)
      const candidate: Parts = {
        subject: marked.subject.split(marker),
        text: marked.text.split(marker),
        ...(marked.html !== undefined ? { html: marked.html.split(marker) } : {}),
      }
      const faithful = PROBE_CODES.every((probe) => sameRendering(fromSplit(candidate, probe), renderWhole(probe)))
      parts = faithful ? candidate : null
      // Bounded: a key per expiry a deployment uses; a flood of odd expiries only costs re-rendering.
      if (split.size >= 1_024) split.clear()
      split.set(key, parts)
    }
    return parts ? fromSplit(parts, code) : renderWhole(code)
  }
}
