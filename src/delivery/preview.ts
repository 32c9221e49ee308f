import { mkdir, writeFile } from 'node:fs/promises'
import path from 'node:path'
import type { Channel } from '../outbox/constants.ts'
import { LOCALES } from './locales.ts'
import { loadTemplates, sampleValues, TEMPLATE_PURPOSES, type Branding } from './templates.ts'

export { sampleValues }

/**
 * `npm run preview`: every purpose × channel × locale rendered with sample values into `dir`
 * (`<locale>/<purpose>.<channel>.txt`, `.html` for email) and an index.html linking them all.
 */
export async function writePreviews(
  dir: string,
  branding: Branding = { productName: 'Sealpost', supportUrl: 'https://support.sealpost.test/help', defaultLocale: 'en' },
): Promise<string[]> {
  const templates = loadTemplates(branding)
  const written: string[] = []
  const links: string[] = []
  for (const locale of LOCALES) {
    await mkdir(path.join(dir, locale), { recursive: true })
    for (const purpose of TEMPLATE_PURPOSES) {
      for (const channel of ['email', 'whatsapp', 'sms'] as Channel[]) {
        const rendered = templates.render(purpose, channel, locale, sampleValues(purpose))
        const base = path.join(locale, `${purpose}.${channel}`)
        await writeFile(
          path.join(dir, `${base}.txt`),
          channel === 'email' ? `Subject: ${rendered.subject}\n\n${rendered.text}` : rendered.text,
        )
        written.push(`${base}.txt`)
        links.push(`<li><a href="${base}.txt">${base}.txt</a></li>`)
        if (rendered.html) {
          await writeFile(path.join(dir, `${base}.html`), rendered.html)
          written.push(`${base}.html`)
          links.push(`<li><a href="${base}.html">${base}.html</a></li>`)
        }
      }
    }
  }
  await writeFile(
    path.join(dir, 'index.html'),
    `<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>Sealpost message previews</title></head>\n<body><h1>Message previews</h1><ul>\n${links.join('\n')}\n</ul></body></html>\n`,
  )
  return written
}
