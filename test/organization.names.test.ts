import { expect } from 'chai'
import { uuidv7 } from 'uuidv7'
import { createKnex } from '../src/db/knex.ts'
import { composeMessage, defaultTemplates } from '../src/delivery/compose.ts'
import { checkOrganizationName } from '../src/organization/organization-name.ts'
import { createTestDatabase } from './support/database.ts'
import { createVerifiedIdentity, uniqueEmail } from './support/helpers.ts'

/** A phisher's attempts to get a link or forged lines into an official invitation email. */
const REFUSED: [string, string, string][] = [
  ['the issue’s example', 'Security team: verify at https://evil.example', 'link'],
  ['a bare domain', 'Verify at evil.example', 'link'],
  ['www and a full-width dot', 'Visit www．evil', 'link'],
  ['www. without a scheme', 'Acme www.evil', 'link'],
  ['a scheme with spaces', 'Acme https : // x', 'link'],
  ['javascript:', 'javascript:alert(1)', 'link'],
  ['mailto:', 'mailto:boss', 'link'],
  ['protocol-relative', 'Acme //evil', 'link'],
  ['a UNC path', 'Acme \\\\evil\\share', 'link'],
  ['full-width colon, slash and dot (NFKC)', 'https：／／evil．com', 'link'],
  ['ideographic full stop', 'Verify at evil。com', 'link'],
  ['halfwidth ideographic full stop', 'Verify at evil｡com', 'link'],
  ['one-dot leader', 'evil․com', 'link'],
  ['Arabic-Indic zero as a dot', 'evil٠com', 'link'],
  ['ratio sign and division slashes', 'https∶∕∕evil', 'link'],
  ['modifier-letter colon and fraction slash', 'httpsː⁄⁄evil', 'link'],
  ['a defanged dot', 'evil[.]com', 'link'],
  ['a spelled-out dot in brackets', 'evil(dot)com', 'link'],
  ['a spelled-out dot', 'Visit evil dot com now', 'link'],
  ['a spaced dot', 'evil . com', 'link'],
  ['an IDN domain', 'пример.рф', 'link'],
  ['punycode', 'xn--80ak6aa92e', 'link'],
  ['a dotted IPv4 address', 'Verify at 203 . 0 . 113 . 5', 'link'],
  ['an e-mail address', 'Write to boss@evil', 'email_address'],
  ['a full-width at sign', 'boss＠evil', 'email_address'],
  ['a small at sign', 'boss﹫evil', 'email_address'],
  ['an at spelled out', 'boss (at) evil', 'email_address'],
  ['a line feed', 'Acme\nVerify your account now', 'invisible_or_control'],
  ['a carriage return', 'Acme\rVerify', 'invisible_or_control'],
  ['a tab', 'Acme\tResearch', 'invisible_or_control'],
  ['a line separator', 'Acme\u2028Verify', 'invisible_or_control'],
  ['a paragraph separator', 'Acme\u2029Verify', 'invisible_or_control'],
  ['a next-line control', 'Acme\u0085Verify', 'invisible_or_control'],
  ['a right-to-left override', 'Acme \u202Emoc.live', 'invisible_or_control'],
  ['a right-to-left isolate', 'Acme \u2067x\u2069', 'invisible_or_control'],
  ['a right-to-left mark', 'Acme\u200F', 'invisible_or_control'],
  ['a zero-width space inside a domain', 'evil\u200B.com', 'invisible_or_control'],
  ['a zero-width joiner', 'Ac\u200Dme', 'invisible_or_control'],
  ['a byte-order mark', '\uFEFFAcme', 'invisible_or_control'],
  ['a word joiner', 'Ac\u2060me', 'invisible_or_control'],
  ['a Hangul filler', 'Acme\u3164Research', 'invisible_or_control'],
  ['a Braille blank', 'Acme\u2800', 'invisible_or_control'],
  ['an ogham space', 'Acme\u1680Research', 'invisible_or_control'],
  ['a variation selector', 'Acme\uFE0F', 'invisible_or_control'],
  ['private use', 'Acme\uE000', 'invisible_or_control'],
  // Call-back phishing: a number to ring under the official sender, however it is spaced.
  ['a call-back number', 'Acme Billing: call 0800 555 0199', 'phone_number'],
  ['an international number', 'Support +1 (415) 555-0132', 'phone_number'],
  ['a dotted number', 'Acme 415.555.0132', 'phone_number'],
  ['seven digits run together', 'Acme 5550132', 'phone_number'],
  ['full-width digits (NFKC)', 'Acme ０８００５５５０１９９', 'phone_number'],
  ['Arabic-Indic digits', 'Acme ٠٨٠٠٥٥٥٠١٩٩', 'phone_number'],
  ['en dashes between the groups', 'Acme 555–0132–99', 'phone_number'],
  ['only spaces', '   ', 'length'],
  ['too long', 'A'.repeat(101), 'length'],
]

const ACCEPTED: [string, string][] = [
  ['Acme Research', 'Acme Research'],
  ['J.P. Morgan Labs', 'J.P. Morgan Labs'],
  ['Müller & Söhne GmbH', 'Müller & Söhne GmbH'],
  ['Acme Co. Ltd', 'Acme Co. Ltd'],
  ['Version 2.0 Team', 'Version 2.0 Team'],
  ['Polka Dot Company', 'Polka Dot Company'],
  ['Công ty Hạnh Phúc', 'Công ty Hạnh Phúc'],
  ['株式会社サンプル', '株式会社サンプル'],
  ['שלום עולם', 'שלום עולם'],
  ['हिन्दी समूह', 'हिन्दी समूह'],
  ['Security team: Berlin', 'Security team: Berlin'],
  ['  Acme   Research  ', 'Acme Research'],
  ['Ａｃｍｅ', 'Acme'],
  ['A\u00A0Team', 'A Team'],
  ['Acme 3000', 'Acme 3000'],
  ['Class of 2024-25', 'Class of 2024-25'],
  ['Unit 731 Berlin 10115', 'Unit 731 Berlin 10115'],
]

describe('organization names', () => {
  for (const [what, name, reason] of REFUSED) {
    it(`refuses ${what}`, () => {
      expect(checkOrganizationName(name)).to.deep.equal({ ok: false, reason })
    })
  }
  for (const [name, stored] of ACCEPTED) {
    it(`accepts ${JSON.stringify(name)} as ${JSON.stringify(stored)}`, () => {
      expect(checkOrganizationName(name)).to.deep.equal({ ok: true, name: stored })
    })
  }
})

describe('organization names after the web', () => {
  it('the invitation mails no stored name that fails the rule, in text or HTML', () => {
    const now = new Date()
    const later = new Date(now.getTime() + 86_400_000)
    const render = (organizationName: string, locale = 'en') =>
      composeMessage(
        defaultTemplates(),
        { id: 'm', purpose: 'invitation', channel: 'email', locale, expires_at: later },
        Buffer.from('token'),
        { organizationName, invitationLinkBaseUrl: 'https://app.sealpost.test', now },
      )
    const legacy = render('Acme\nSecurity team: verify at https://evil.example')
    expect(legacy.text + (legacy.html ?? '')).to.not.include('evil')
    expect(legacy.text.split('\n')[0]).to.equal('You have been invited to join an organization on Sealpost.')
    expect(render('Acme\u202Eevil', 'de').text.split('\n')[0]).to.equal(
      'Sie wurden eingeladen, einer Organisation auf Sealpost beizutreten.',
    )
    expect(render('Acme Billing: call 0800 555 0199').text.split('\n')[0], 'a stored call-back number').to.equal(
      'You have been invited to join an organization on Sealpost.',
    )
    expect(render('Acme Research').text).to.include('join Acme Research on Sealpost')
  })

  it('the database refuses a name with a line separator, a bidi control or a zero-width space from the api login', async () => {
    const db = await createTestDatabase()
    const api = createKnex(db.apiUrl, { applicationName: 'names-api', max: 1 })
    try {
      const { identityId } = await createVerifiedIdentity(db.owner, uniqueEmail('creator'))
      for (const name of ['Acme\u2028Verify', 'Acme \u202Emoc', 'evil\u200B.com', 'Acme\nVerify']) {
        const code = await api('organization.organizations')
          .insert({ id: uuidv7(), name, created_by: identityId })
          .then(
            () => 'allowed',
            (error: { code?: string }) => error.code,
          )
        expect(code, JSON.stringify(name)).to.equal('23514')
      }
      await api('organization.organizations').insert({ id: uuidv7(), name: 'Acme Research', created_by: identityId })
    } finally {
      await api.destroy()
      await db.drop()
    }
  })
})
