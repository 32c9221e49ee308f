import { mkdir, writeFile } from 'node:fs/promises'
import path from 'node:path'
import type { Channel } from '../outbox/constants.ts'
import { LOCALES } from './locales.ts'
import { loadTemplates, TEMPLATE_PURPOSES, type Branding, type MessageValues, type TemplatePurpose } from './templates.ts'

const NOW = new Date('2026-12-01T09:00:00Z')

/** Sample values per purpose; the organization name is hostile on purpose, to show the escaping. */
export function sampleValues(purpose: TemplatePurpose): MessageValues {
  const expiresAt = new Date(
    NOW.getTime() + (purpose === 'invitation' ? 7 * 86_400_000 : purpose === 'security_notice' ? 86_400_000 : 600_000),
  )
  if (purpose === 'invitation')
    return {
      now: NOW,
      expiresAt,
      organizationName: 'Acme <b>Research</b> & "Sons"',
      link: 'https://app.sealpost.test/join#token=Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx5',
    }
  if (purpose === 'security_notice')
    return { now: NOW, expiresAt, notice: { event: 'sign_in_method_added', at: NOW, identifier: 'b•••b@e•••.com' } }
  return { now: NOW, expiresAt, code: '482913' }
}

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
      for (const channel of ['email', 'whatsapp'] as Channel[]) {
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
