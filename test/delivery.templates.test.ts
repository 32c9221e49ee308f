import { execFile } from 'node:child_process'
import { cp, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { expect } from 'chai'
import Handlebars from 'handlebars'
import { LOCALES } from '../src/delivery/locales.ts'
import { sampleValues, writePreviews } from '../src/delivery/preview.ts'
import { plainText } from '../src/delivery/plain-text.ts'
import { loadTemplates, TEMPLATE_PURPOSES, TEMPLATES_DIR, TemplateError, type MessageValues } from '../src/delivery/templates.ts'
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
      for (const channel of ['email', 'whatsapp', 'sms'] as Channel[]) {
        it(`renders ${purpose} on ${channel} in ${locale}: its secret exactly once, every value escaped for the medium`, () => {
          const values = valuesFor(purpose)
          const rendered = templates.render(purpose, channel, locale, values)
          const parts = [rendered.text, ...(rendered.html ? [rendered.html] : [])]
          expect(rendered.html === undefined, 'HTML for email only').to.equal(channel !== 'email')
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
            // An SMS notice leaves the masked identifier out: its • alone would make the SMS UCS-2.
            if (channel === 'sms') expect(rendered.text).to.not.include('@e•••.com')
            else expect(rendered.text).to.include('<b>x</b>@e•••.com')
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

  it("shows a courier caller's app name instead of the product name, escaped for the medium", () => {
    const at = new Date('2026-12-01T09:00:00Z')
    const rendered = templates.render('verification_code', 'email', 'en', {
      now: at,
      expiresAt: new Date(at.getTime() + 600_000),
      code: '482913',
      appName: HOSTILE,
    })
    expect(rendered.subject).to.not.match(/[\r\n]/)
    expect(rendered.text).to.not.include('\nBcc:')
    expect(rendered.html).to.include('Acme &lt;img src&#x3D;x onerror&#x3D;alert(1)&gt;').and.not.include('Sealpost')
  })

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

  /** A copy of the shipped templates with one file edited; removed after `use`. */
  async function withEditedCopy(file: string, edit: (text: string) => string, use: (dir: string) => Promise<void>) {
    const dir = await mkdtemp(path.join(tmpdir(), 'sealpost-templates-'))
    try {
      await cp(TEMPLATES_DIR, dir, { recursive: true })
      await writeFile(path.join(dir, file), edit(await readFile(path.join(dir, file), 'utf8')))
      await use(dir)
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  }
  const branding = { productName: 'Sealpost', defaultLocale: 'en' } as const

  it('refuses at load, not at a send, a template that cannot render (a value no message has), naming it', async () => {
    await withEditedCopy(
      path.join('es', 'step_up.whatsapp.txt.hbs'),
      (text) => `${text}{{discountCode}}\n`,
      async (dir) => {
        expect(() => loadTemplates(branding, dir))
          .to.throw(TemplateError)
          .with.property('message')
          .that.matches(/^template es\/step_up\.whatsapp cannot render: .*discountCode/)
      },
    )
    expect(() => loadTemplates(branding), 'the shipped templates').to.not.throw()
  })

  it('renders a code message the same whether its rendering is reused or not: every code template, hostile codes, several expiries', () => {
    const shop = {
      productName: 'Sealpost <Beta>',
      supportUrl: 'https://support.sealpost.test/help?a=1&b=2',
      defaultLocale: 'de',
      otpOriginDomain: 'app.sealpost.test',
    } as const
    const reused = loadTemplates(shop)
    const whole = loadTemplates(shop, TEMPLATES_DIR, { reuseCodeRenderings: false })
    const codes = ['482913', '000000', '<b>1</b> & "2" \'3\' `4` =5', '7\r\nBcc: x\u202e', '']
    const now = new Date('2026-12-01T09:00:00Z')
    let compared = 0
    for (const locale of [...LOCALES, 'fr'])
      for (const purpose of ['sign_up', 'add_sign_in_method', 'password_recovery', 'step_up'] as const)
        for (const channel of ['email', 'whatsapp', 'sms'] as Channel[])
          for (const minutes of [1, 10, 10, 61])
            for (const code of codes) {
              const values = { code, now, expiresAt: new Date(now.getTime() + minutes * 60_000) }
              expect(
                reused.render(purpose, channel, locale, values),
                `${locale}/${purpose}.${channel}, ${minutes} min, ${JSON.stringify(code)}`,
              ).to.deep.equal(whole.render(purpose, channel, locale, values))
              compared += 1
            }
    expect(compared).to.equal(4 * 4 * 3 * 4 * codes.length)
  })

  it('renders whole every time a template that gives its code otherwise than as a plain value (unescaped in HTML)', async () => {
    await withEditedCopy(
      path.join('en', 'step_up.email.html.hbs'),
      (text) => text.replace('{{code}}', '{{{code}}}'),
      async (dir) => {
        const reused = loadTemplates(branding, dir)
        const whole = loadTemplates(branding, dir, { reuseCodeRenderings: false })
        const now = new Date('2026-12-01T09:00:00Z')
        for (const code of ['482913', '<i>5</i>']) {
          const values = { code, now, expiresAt: new Date(now.getTime() + 600_000) }
          const rendered = reused.render('step_up', 'email', 'en', values)
          expect(rendered).to.deep.equal(whole.render('step_up', 'email', 'en', values))
          expect(rendered.html).to.include(code)
        }
      },
    )
  })

  it('renders whole every time a template that branches on its code or formats it (an empty code; ICU {code, number})', async () => {
    const now = new Date('2026-12-01T09:00:00Z')
    const edits: [string, (text: string) => string, string, 'subject' | 'text'][] = [
      [
        path.join('en', 'step_up.whatsapp.txt.hbs'),
        (text) => text.replace('{{code}}', '{{#if code}}{{code}}{{else}}(no code){{/if}}'),
        '',
        'text',
      ],
      [
        path.join('catalog', 'en.json'),
        (text) => text.replace('"Your verification code"', '"Your verification code {code, number}"'),
        '482913',
        'subject',
      ],
    ]
    for (const [file, edit, code, part] of edits) {
      const before = await readFile(path.join(TEMPLATES_DIR, file), 'utf8')
      expect(edit(before), `the edit applies to ${file}`).to.not.equal(before)
      await withEditedCopy(file, edit, async (dir) => {
        const reused = loadTemplates(branding, dir)
        const whole = loadTemplates(branding, dir, { reuseCodeRenderings: false })
        const values = { code, now, expiresAt: new Date(now.getTime() + 600_000) }
        const channel = part === 'text' ? 'whatsapp' : 'email'
        expect(reused.render('step_up', channel, 'en', values), file).to.deep.equal(whole.render('step_up', channel, 'en', values))
        expect(reused.render('step_up', channel, 'en', values)[part], file).to.match(code ? /482,913/ : /\(no code\)/)
      })
    }
  })

  it('refuses at load a catalog branch only some messages take (a notice about a password change; one minute)', async () => {
    const branches: [string, (text: string) => string][] = [
      ['de.json', (text) => text.replace('Das Passwort Ihres {product}', 'Das Passwort Ihres {produkt}')],
      ['en.json', (text) => text.replace(/one \{# minute\}/, 'one {# minute {typo}}')],
    ]
    for (const [file, edit] of branches) {
      const before = await readFile(path.join(TEMPLATES_DIR, 'catalog', file), 'utf8')
      expect(edit(before), `the edit applies to ${file}`).to.not.equal(before)
      await withEditedCopy(path.join('catalog', file), edit, async (dir) => {
        expect(() => loadTemplates(branding, dir), file).to.throw(TemplateError)
      })
    }
  })

  it('a worker stopped by a broken template says why on stderr (the start, not a message, fails)', async () => {
    await withEditedCopy(
      path.join('es', 'step_up.whatsapp.txt.hbs'),
      (text) => `${text}{{discountCode}}\n`,
      async (dir) => {
        const root = path.join(import.meta.dirname, '..')
        const href = (file: string) => JSON.stringify(pathToFileURL(path.join(root, file)).href)
        // What src/bin/worker.ts runs, with startWorker's first step over a deployment's broken templates.
        const script = `
        import { main } from ${href('src/bin/main.ts')}
        import { loadTemplates } from ${href('src/delivery/templates.ts')}
        await main('worker', async () => { loadTemplates(${JSON.stringify(branding)}, ${JSON.stringify(dir)}) })`
        const { code, stderr } = await new Promise<{ code: number | null; stderr: string }>((resolve) =>
          execFile(
            process.execPath,
            ['--input-type=module', '-e', script],
            { cwd: root, env: { PATH: process.env.PATH, NODE_ENV: 'development', LOG_LEVEL: 'error' } },
            (error, _stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stderr }),
          ),
        )
        expect(code, 'the start fails').to.equal(1)
        expect(stderr).to.match(/template es\/step_up\.whatsapp cannot render: .*discountCode/)
      },
    )
  })

  it('turns control and direction characters into spaces in plain text', () => {
    expect(plainText('a\r\nb\u202ec\u0000d')).to.equal('a  b c d')
  })

  it('npm run preview writes every purpose × channel × locale, with HTML for email', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'sealpost-preview-'))
    try {
      const written = await writePreviews(dir)
      expect(written).to.have.length(LOCALES.length * TEMPLATE_PURPOSES.length * 4)
      expect(await readdir(path.join(dir, 'de'))).to.include.members([
        'sign_up.email.html',
        'sign_up.email.txt',
        'sign_up.whatsapp.txt',
        'sign_up.sms.txt',
      ])
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})
