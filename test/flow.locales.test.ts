import { expect } from 'chai'
import { negotiateLocale } from '../src/http/locale.ts'
import { eventually, inbox, uniqueEmail } from './support/helpers.ts'
import { useWebStack } from './support/web-stack.ts'

describe('Accept-Language → the locale of the message', () => {
  const table: [string | undefined, string][] = [
    [undefined, 'es'],
    ['de', 'de'],
    ['de-AT,de;q=0.9,en;q=0.8', 'de'],
    ['fr-CH, fr;q=0.9, en;q=0.8, *;q=0.5', 'en'],
    ['en;q=0.2, es;q=0.9', 'es'],
    ['fr, it', 'es'],
    ['*', 'es'],
    ['de;q=0, en', 'en'],
    ['ES-mx', 'es'],
    ['garbage;;;q=x, de', 'de'],
    ['de;q=0.5, en;q=0.8', 'en'],
    ['de-AT, en;q=0.9, de;q=0.1', 'en'],
    ['de;q=abc, en;q=0.5', 'en'],
    [',,,;;;', 'es'],
  ]
  for (const [header, expected] of table) {
    it(`picks ${expected} for ${JSON.stringify(header)} (fallback es)`, () => {
      expect(negotiateLocale(header, 'es')).to.equal(expected)
    })
  }

  it('reads a hostile header (16 KB of ranges, unbalanced quotes) only up to its first whole ranges, quickly and without throwing', () => {
    const hostile = ['a,'.repeat(8_000), `de;q="${'\\"'.repeat(8_000)}`, '*;q=0.1,'.repeat(2_000), `${'x,'.repeat(8_000)}de`]
    const started = performance.now()
    for (let round = 0; round < 100; round += 1) for (const header of hostile) expect(negotiateLocale(header, 'es')).to.equal('es')
    // Unbounded, each of these headers costs negotiation thousands of ranges: the bound keeps the total far below this.
    expect(performance.now() - started).to.be.below(4_000)
  })

  describe('end to end', () => {
    const f = useWebStack()

    it('sends a German email with text and HTML parts for a sign-up with Accept-Language: de, and keeps the locale on the message', async () => {
      const email = uniqueEmail('deutsch')
      const answer = await f.stack.call(
        'POST',
        '/sign-ups',
        { identifier: email, password: 'correct horse battery' },
        { 'accept-language': 'de-DE,de;q=0.9,en;q=0.5' },
      )
      expect(answer.status).to.equal(202)
      const [mail] = await eventually(async () => {
        const found = await inbox(f.stack.emulator.url, email)
        return found.length > 0 ? found : undefined
      }, 'the German email')
      const body = mail!.body as { text?: string; html?: string }
      expect(mail!.subject).to.equal('Ihr Sealpost-Registrierungscode')
      expect(body.text)
        .to.include('Hier ist Ihr Code')
        .and.to.match(/\b\d{6}\b/)
      expect(body.html).to.include('<html lang="de">').and.to.include('Hier ist Ihr Code')
      const code = /\b(\d{6})\b/.exec(body.text!)![1]!
      expect(body.html).to.include(code)
      const row = await f.db.owner('outbox.security_outbox_messages').where({ destination: email }).first('locale')
      expect(row.locale).to.equal('de')
    })

    it('answers in the same shape whatever the language, and a language it does not ship gets DEFAULT_LOCALE', async () => {
      const email = uniqueEmail('francais')
      const answer = await f.stack.call(
        'POST',
        '/sign-ups',
        { identifier: email, password: 'correct horse battery' },
        { 'accept-language': 'fr-FR' },
      )
      expect(answer.status).to.equal(202)
      const [mail] = await eventually(async () => {
        const found = await inbox(f.stack.emulator.url, email)
        return found.length > 0 ? found : undefined
      }, 'the email')
      expect(mail!.subject).to.equal('Confirm your Sealpost sign-up')
    })
  })
})
