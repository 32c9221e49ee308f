import { cp, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { expect } from 'chai'
import Handlebars from 'handlebars'
import { LOCALES } from '../src/delivery/locales.ts'
import { sampleValues, writePreviews } from '../src/delivery/preview.ts'
import { loadTemplates, plainText, TEMPLATE_PURPOSES, TEMPLATES_DIR, type MessageValues } from '../src/delivery/templates.ts'
import type { Channel } from '../src/outbox/constants.ts'

const HOSTILE = 'Acme <img src=x onerror=alert(1)> & "Sons"\r\nBcc: victim@example.com\u202e'
const count = (haystack: string, needle: string) => haystack.split(needle).length - 1

describe('message templates', () => {
  const templates = loadTemplates({
    productName: 'Sealpost <Beta>',
    supportUrl: 'https://support.sealpost.test/help?a=1&b=2',
    defaultLocale: 'en',
  })
  const valuesFor = (purpose: (typeof TEMPLATE_PURPOSES)[number]): MessageValues => {
    const sample = sampleValues(purpose)
    if (purpose === 'invitation') return { ...sample, organizationName: HOSTILE }
    if (purpose === 'security_notice') return { ...sample, notice: { ...sample.notice!, identifier: '<b>x</b>@e•••.com' } }
    return sample
  }

  for (const locale of LOCALES) {
    for (const purpose of TEMPLATE_PURPOSES) {
      for (const channel of ['email', 'whatsapp'] as Channel[]) {
        it(`renders ${purpose} on ${channel} in ${locale}: its secret exactly once, every value escaped for the medium`, () => {
          const values = valuesFor(purpose)
          const rendered = templates.render(purpose, channel, locale, values)
          const parts = [rendered.text, ...(rendered.html ? [rendered.html] : [])]
          expect(rendered.html === undefined, 'HTML for email only').to.equal(channel === 'whatsapp')
          for (const part of [rendered.subject, ...parts]) {
            expect(part, 'no template or ICU syntax left').to.not.match(/\{\{|\}\}|\{[a-z]+[,}]/)
            expect(part).to.not.include('undefined')
          }
          if (values.code) {
            expect(count(rendered.text, values.code)).to.equal(1)
            if (rendered.html) expect(count(rendered.html, values.code)).to.equal(1)
            expect(rendered.subject).to.not.include(values.code)
          } else if (values.link) {
            expect(count(rendered.text, values.link)).to.equal(1)
            if (rendered.html) expect(count(rendered.html, `href="${Handlebars.escapeExpression(values.link)}"`)).to.equal(1)
            expect(rendered.subject).to.not.include(values.link)
          } else {
            // A security notice carries no secret at all: no code, no link; it says what and when.
            for (const part of parts) {
              expect(part).to.not.match(/\b\d{6}\b/)
              expect(part).to.not.match(/https?:\/\/(?!support\.sealpost\.test)/)
              expect(part).to.include('2026')
            }
            expect(rendered.text).to.include('<b>x</b>@e•••.com')
          }
          // Plain text: no value can start a line of its own or reverse the text direction.
          expect(rendered.text).to.not.match(/[\r\u202e]/)
          expect(rendered.text).to.not.include('\nBcc:')
          expect(rendered.subject).to.not.match(/[\r\n]/)
          if (rendered.html) {
            expect(rendered.html).to.not.match(/<img|<script|<b>|onerror=|<link|url\(|src=/i)
            expect(rendered.html).to.include('Sealpost &lt;Beta&gt;')
            if (purpose === 'invitation')
              expect(rendered.html).to.include('Acme &lt;img src&#x3D;x onerror&#x3D;alert(1)&gt; &amp; &quot;Sons&quot;')
            expect(rendered.html).to.match(new RegExp(`<html lang="${locale}">`))
          }
        })
      }
    }
  }

  it('says which change a security notice is about, in each locale', () => {
    const at = new Date('2026-12-01T09:00:00Z')
    const changed = (locale: string) =>
      templates.render('security_notice', 'email', locale, {
        now: at,
        expiresAt: at,
        notice: { event: 'password_changed', at, identifier: 'a•••e@e•••.com' },
      }).text
    expect(changed('en')).to.include('The password of your Sealpost <Beta> account was changed.')
    expect(changed('de')).to.include('Das Passwort Ihres Sealpost <Beta>-Kontos wurde geändert.')
    expect(changed('es')).to.include('Se cambió la contraseña de tu cuenta de Sealpost <Beta>.')
  })

  it('falls back to DEFAULT_LOCALE for a locale it does not ship', () => {
    const german = loadTemplates({ productName: 'Sealpost', defaultLocale: 'de' })
    expect(german.render('step_up', 'email', 'fr', sampleValues('step_up')).subject).to.equal('Ihr Sealpost-Bestätigungscode')
  })

  it('refuses at load, not at a send, a template that cannot render (a value no message has)', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'sealpost-templates-'))
    try {
      await cp(TEMPLATES_DIR, dir, { recursive: true })
      const file = path.join(dir, 'es', 'step_up.whatsapp.txt.hbs')
      await writeFile(file, `${await readFile(file, 'utf8')}{{discountCode}}\n`)
      expect(() => loadTemplates({ productName: 'Sealpost', defaultLocale: 'en' }, dir)).to.throw(/discountCode/)
      expect(() => loadTemplates({ productName: 'Sealpost', defaultLocale: 'en' }), 'the shipped templates').to.not.throw()
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  it('turns control and direction characters into spaces in plain text', () => {
    expect(plainText('a\r\nb\u202ec\u0000d')).to.equal('a  b c d')
  })

  it('npm run preview writes every purpose × channel × locale, with HTML for email', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'sealpost-preview-'))
    try {
      const written = await writePreviews(dir)
      expect(written).to.have.length(LOCALES.length * TEMPLATE_PURPOSES.length * 3)
      expect(await readdir(path.join(dir, 'de'))).to.include.members(['sign_up.email.html', 'sign_up.email.txt', 'sign_up.whatsapp.txt'])
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})
