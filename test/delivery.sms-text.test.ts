import { expect } from 'chai'
import { ConfigError } from '../config/schema.ts'
import { loadConfig } from '../src/providers/config.ts'
import { LOCALES } from '../src/delivery/locales.ts'
import { smsSegments } from '../src/delivery/sms-segments.ts'
import { SECURITY_EVENTS } from '../src/identity/security-notices.ts'
import { loadTemplates, sampleValues, TEMPLATE_PURPOSES, type Branding, type MessageValues } from '../src/delivery/templates.ts'
import type { Channel } from '../src/outbox/constants.ts'

const CODE_PURPOSES = ['sign_up', 'add_sign_in_method', 'password_recovery', 'step_up', 'verification_code'] as const
const NOW = new Date('2026-12-01T09:00:00Z')
const CODE = '482913'
// The budget docs/deliverability.md promises one segment for: a product name of 30 characters, a
// host of 40, a code valid up to 999 minutes (the longest expiry wording a code takes in practice).
const PRODUCT_30 = 'Northwind Identity Platform EU'
const DOMAIN_40 = 'accounts.northwind-identity-platform.eu'.padEnd(40, 'x')
const PRODUCT_60 = 'Northwind Identity Platform for the European Economic Area'.padEnd(60, 'x')
const codeValues = (minutes: number): MessageValues => ({ code: CODE, now: NOW, expiresAt: new Date(NOW.getTime() + minutes * 60_000) })
const branding = (productName: string, otpOriginDomain?: string): Branding => ({
  productName,
  supportUrl: 'https://support.northwind.example/contact-us',
  defaultLocale: 'en',
  ...(otpOriginDomain ? { otpOriginDomain } : {}),
})

describe('SMS segments (3GPP TS 23.038)', () => {
  it('counts GSM-7 text: 160 septets in one segment, then 153 per part', () => {
    expect(smsSegments('a'.repeat(160))).to.deep.equal({ encoding: 'GSM-7', units: 160, segments: 1 })
    expect(smsSegments('a'.repeat(161))).to.deep.equal({ encoding: 'GSM-7', units: 161, segments: 2 })
    expect(smsSegments('a'.repeat(306)).segments).to.equal(2)
    expect(smsSegments('a'.repeat(307)).segments).to.equal(3)
  })

  it('counts a character of the extension table as two septets and never cuts its escape pair at a seam', () => {
    expect(smsSegments('€'.repeat(80))).to.deep.equal({ encoding: 'GSM-7', units: 160, segments: 1 })
    expect(smsSegments('{}[]~\\^|\f€')).to.include({ encoding: 'GSM-7', units: 20 })
    // 152 septets, then an escape pair that would straddle the 153rd: it moves whole to part two.
    expect(smsSegments(`${'a'.repeat(152)}€${'a'.repeat(152)}`)).to.deep.equal({ encoding: 'GSM-7', units: 306, segments: 3 })
  })

  it('keeps the whole default alphabet in GSM-7, German umlauts and ß, Spanish ñ é ¿ ¡ among it', () => {
    const table =
      '@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !"#¤%&\'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà'
    expect(smsSegments(table)).to.include({ encoding: 'GSM-7', units: 127 })
    expect(smsSegments('Größe Ärger Öl Übel ¿Mañana? ¡Café!').encoding).to.equal('GSM-7')
  })

  it('sends a text with one character outside GSM-7 as UCS-2: 70 code units in one segment, then 67 per part', () => {
    for (const outside of ['á', 'í', 'ó', 'ú', 'ç', '\u202f', '•', '’'])
      expect(smsSegments(`Hola ${outside}`).encoding, JSON.stringify(outside)).to.equal('UCS-2')
    expect(smsSegments(`á${'a'.repeat(69)}`)).to.deep.equal({ encoding: 'UCS-2', units: 70, segments: 1 })
    expect(smsSegments(`á${'a'.repeat(70)}`)).to.deep.equal({ encoding: 'UCS-2', units: 71, segments: 2 })
    expect(smsSegments(`á${'a'.repeat(133)}`).segments).to.equal(2)
    expect(smsSegments(`á${'a'.repeat(134)}`).segments).to.equal(3)
    // An emoji is two UTF-16 code units, and a surrogate pair is never cut at a seam either.
    expect(smsSegments('🙂'.repeat(35))).to.deep.equal({ encoding: 'UCS-2', units: 70, segments: 1 })
    expect(smsSegments(`${'a'.repeat(66)}${'🙂'.repeat(34)}`)).to.deep.equal({ encoding: 'UCS-2', units: 134, segments: 3 })
  })
})

describe('SMS message text', () => {
  const budget = loadTemplates(branding(PRODUCT_30, DOMAIN_40))
  const longest = loadTemplates(branding(PRODUCT_60, DOMAIN_40))
  const bare = loadTemplates(branding(PRODUCT_30))

  for (const locale of LOCALES) {
    it(`fits every code SMS in ${locale} into one GSM-7 segment at the budget's longest values, origin-bound line included`, () => {
      for (const purpose of CODE_PURPOSES)
        for (const minutes of [1, 10, 999]) {
          const text = budget.render(purpose, 'sms', locale, codeValues(minutes)).text
          expect(text.split('\n').at(-1), `${purpose}, ${minutes} min`).to.equal(`@${DOMAIN_40} #${CODE}`)
          expect(smsSegments(text), `${purpose}, ${minutes} min:\n${text}`).to.include({ encoding: 'GSM-7', segments: 1 })
          // PRODUCT_NAME at its limit of 60 characters costs a second segment, never a third.
          expect(smsSegments(longest.render(purpose, 'sms', locale, codeValues(minutes)).text)).to.include({
            encoding: 'GSM-7',
            segments: 2,
          })
        }
    })

    it(`sends an invitation and every security notice in ${locale} in two GSM-7 segments at most (their documented exception)`, () => {
      const invitation = {
        ...sampleValues('invitation'),
        organizationName: 'Northwind Research and Development Cooperative of the Upper Rhine Valley'.padEnd(100, 'x'),
        link: 'https://app.northwind.example/join#token=Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx5',
      }
      const text = longest.render('invitation', 'sms', locale, invitation).text
      expect(text).to.include(invitation.link)
      expect(smsSegments(text), text).to.include({ encoding: 'GSM-7', segments: 2 })
      // A courier magic link carries the caller's link (https, up to 2 048 characters): one segment for a short one, two for a typical one.
      const magic = (link: string) => budget.render('magic_link', 'sms', locale, { ...codeValues(15), link }).text
      expect(smsSegments(magic('https://app.example.com/l/Zm9vYmFy')), magic('https://app.example.com/l/Zm9vYmFy')).to.include({
        encoding: 'GSM-7',
        segments: 1,
      })
      expect(smsSegments(magic(invitation.link)), magic(invitation.link)).to.include({ encoding: 'GSM-7' })
      expect(smsSegments(magic(invitation.link)).segments).to.be.at.most(2)
      // Our flows' events and those relayed from Supabase's and Kratos' hooks, and one no catalog names.
      for (const event of [...SECURITY_EVENTS, 'a_future_event']) {
        const sample = sampleValues('security_notice')
        const notice = budget.render('security_notice', 'sms', locale, { ...sample, notice: { ...sample.notice!, event } }).text
        expect(notice, event).to.include('2026-12-01 09:00 UTC').and.include('https://support.northwind.example/contact-us')
        expect(smsSegments(notice), `${event}:\n${notice}`).to.include({ encoding: 'GSM-7' })
        expect(smsSegments(notice).segments).to.be.at.most(2)
      }
    })

    it(`ends every ${locale} code SMS with exactly "@host #code" as its last line, the code also in the text above it`, () => {
      for (const purpose of CODE_PURPOSES) {
        const text = budget.render(purpose, 'sms', locale, codeValues(10)).text
        const lines = text.split('\n')
        expect(lines.at(-1)).to.equal(`@${DOMAIN_40} #${CODE}`)
        expect(lines.slice(0, -1).join('\n')).to.include(CODE).and.not.include('@')
      }
    })

    it(`leaves the origin-bound line out in ${locale} when OTP_ORIGIN_DOMAIN is unset, on WhatsApp and email, and on messages without a code`, () => {
      for (const purpose of CODE_PURPOSES) {
        expect(bare.render(purpose, 'sms', locale, codeValues(10)).text)
          .to.not.include('@')
          .and.not.include(`#${CODE}`)
        for (const channel of ['whatsapp', 'email'] as Channel[])
          expect(budget.render(purpose, channel, locale, codeValues(10)).text).to.not.include(`#${CODE}`)
      }
      for (const purpose of TEMPLATE_PURPOSES.filter((purpose) => !(CODE_PURPOSES as readonly string[]).includes(purpose)))
        expect(budget.render(purpose, 'sms', locale, sampleValues(purpose)).text).to.not.include(DOMAIN_40)
    })
  }

  it('takes OTP_ORIGIN_DOMAIN only as a lower-case host name', () => {
    expect(loadConfig({ OTP_ORIGIN_DOMAIN: 'app.example.com' }, 'worker').OTP_ORIGIN_DOMAIN).to.equal('app.example.com')
    expect(loadConfig({}, 'worker').OTP_ORIGIN_DOMAIN).to.equal(undefined)
    for (const value of [
      'https://app.example.com',
      'app.example.com:443',
      'app.example.com/login',
      'App.Example.com',
      '127.0.0.1',
      'app..example.com',
      '-app.example.com',
      'app.example.com #000000',
      'app.example.com\n@evil.example',
    ]) {
      try {
        loadConfig({ OTP_ORIGIN_DOMAIN: value }, 'worker')
        expect.fail(`accepted ${JSON.stringify(value)}`)
      } catch (error) {
        expect(error, JSON.stringify(value)).to.be.instanceOf(ConfigError)
        expect((error as ConfigError).variables).to.deep.equal(['OTP_ORIGIN_DOMAIN'])
      }
    }
  })
})
