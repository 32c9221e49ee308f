import { expect } from 'chai'
import { freePort } from '../src/db/embedded.ts'
import { DeliveryFailureError, type OutgoingMessage } from '../src/providers/provider.ts'
import { createWhatsAppCloudConnector } from '../src/providers/whatsapp-cloud/connector.ts'
import { startFakeWhatsAppCloud, type CloudApiBehavior } from '../src/providers/whatsapp-cloud/fake.ts'
import { createPhoneInbox } from '../src/providers/phone-inbox.ts'

const TOKEN = 'cloud-access-token-not-secret'
const PHONE_NUMBER_ID = '106540352242922'
const TEMPLATE = 'sealpost_code'
const MESSAGE: OutgoingMessage = {
  messageId: 'm-1',
  destination: '+5491155554455',
  subject: 'Your code',
  text: 'Your Sealpost code is 493027.',
  code: '493027',
  locale: 'de',
}

type Seen = { failureClass: string; providerCode: string; effect: string | null; recipientOnly: boolean; retryAfterAt: Date | null }

describe('WhatsApp Cloud API connector against the fake Cloud API', () => {
  const now = new Date('2026-12-02T12:00:00Z')
  let fake: Awaited<ReturnType<typeof startFakeWhatsAppCloud>>
  let connector: ReturnType<typeof createWhatsAppCloudConnector>
  const inbox = createPhoneInbox()

  const connect = (apiUrl: string, template = TEMPLATE, phoneNumberId = PHONE_NUMBER_ID) =>
    createWhatsAppCloudConnector({
      apiUrl,
      accessToken: TOKEN,
      phoneNumberId,
      template,
      languages: 'en:en_US,de:de,es:es',
      clock: () => now,
    })

  async function send(message: OutgoingMessage = MESSAGE, timeoutMs = 2_000): Promise<{ providerMessageId: string } | Seen> {
    try {
      return await connector.dispatch({ ...message }, AbortSignal.timeout(timeoutMs))
    } catch (error) {
      if (!(error instanceof DeliveryFailureError)) throw error
      const { failureClass, providerCode, effect, recipientOnly, retryAfterAt } = error
      return { failureClass, providerCode, effect, recipientOnly, retryAfterAt }
    }
  }

  beforeEach(async () => {
    fake = await startFakeWhatsAppCloud({ accessToken: TOKEN, phoneNumberId: PHONE_NUMBER_ID, template: TEMPLATE, inbox })
    connector = connect(fake.url)
  })
  afterEach(async () => {
    connector.close()
    await fake.stop()
  })

  it('sends the authentication template with the code in its body and copy-code button, and returns the wamid', async () => {
    const sent = await send()
    expect(sent)
      .to.have.property('providerMessageId')
      .that.matches(/^wamid\./)
    expect(fake.requests[0]!.authorization).to.equal(`Bearer ${TOKEN}`)
    expect(fake.requests[0]!.body).to.deep.equal({
      messaging_product: 'whatsapp',
      recipient_type: 'individual',
      to: MESSAGE.destination,
      type: 'template',
      template: {
        name: TEMPLATE,
        language: { code: 'de' },
        components: [
          { type: 'body', parameters: [{ type: 'text', text: '493027' }] },
          { type: 'button', sub_type: 'url', index: '0', parameters: [{ type: 'text', text: '493027' }] },
        ],
      },
    })
    expect(inbox.list().at(-1)).to.include({ provider: 'whatsapp_cloud', to: MESSAGE.destination })
    expect(inbox.list().at(-1)!.text).to.include('493027')
  })

  it('falls back to the first listed language for a locale without a template language', async () => {
    await send({ ...MESSAGE, locale: 'fr' })
    expect((fake.requests[0]!.body as { template: { language: unknown } }).template.language).to.deep.equal({ code: 'en_US' })
  })

  it('sends a message without a code nowhere and lets it take the next phone channel', async () => {
    expect(await send({ ...MESSAGE, code: undefined })).to.deep.include({
      failureClass: 'REJECTED',
      effect: 'channel_unreachable',
      providerCode: 'NoTemplateForPurpose',
    })
    expect(fake.requests).to.have.length(0)
  })

  it('answers a number without WhatsApp (131026) as unreachable on this channel, not a dead end for the person', async () => {
    fake.withoutWhatsApp(MESSAGE.destination)
    expect(await send()).to.deep.include({
      failureClass: 'REJECTED',
      providerCode: 'WA131026',
      effect: 'channel_unreachable',
      recipientOnly: true,
    })
  })

  const cases: [string, CloudApiBehavior, Partial<Seen>][] = [
    ['re-engagement (131047)', { kind: 'error', code: 131047 }, { failureClass: 'REJECTED', effect: 'channel_unreachable' }],
    [
      'the throughput limit (130429) with Retry-After',
      { kind: 'error', code: 130429, status: 429, headers: { 'retry-after': '30' } },
      { failureClass: 'THROTTLED', retryAfterAt: new Date(now.getTime() + 30_000) },
    ],
    [
      'the pair rate limit (131056)',
      { kind: 'error', code: 131056 },
      { failureClass: 'THROTTLED', recipientOnly: true, retryAfterAt: null },
    ],
    ['the account rate limit (80007)', { kind: 'error', code: 80007 }, { failureClass: 'THROTTLED', recipientOnly: false }],
    ['too many API calls (4)', { kind: 'error', code: 4 }, { failureClass: 'THROTTLED' }],
    ['the call rate limit (613)', { kind: 'error', code: 613 }, { failureClass: 'THROTTLED' }],
    ['permission denied (10)', { kind: 'error', code: 10, status: 403 }, { failureClass: 'UNAVAILABLE', effect: 'provider_misconfigured' }],
    [
      'an API permission (200)',
      { kind: 'error', code: 200, status: 403 },
      { failureClass: 'UNAVAILABLE', effect: 'provider_misconfigured' },
    ],
    ['the parameter count mismatch (132000)', { kind: 'error', code: 132000 }, { effect: 'provider_misconfigured' }],
    ['something went wrong (131000)', { kind: 'error', code: 131000, status: 500 }, { failureClass: 'UNAVAILABLE', effect: null }],
    ['a 503 without a body', { kind: 'status', status: 503 }, { failureClass: 'UNAVAILABLE', providerCode: 'HTTP503' }],
    [
      'an invalid parameter (100): this request, as it is',
      { kind: 'error', code: 100 },
      { failureClass: 'REJECTED', effect: null, recipientOnly: false },
    ],
    [
      'the person stopped messages from us (131050)',
      { kind: 'error', code: 131050 },
      { failureClass: 'REJECTED', effect: null, recipientOnly: true },
    ],
    [
      'a 2xx without a message id',
      { kind: 'status', status: 200, body: { messaging_product: 'whatsapp' } },
      { failureClass: 'INDETERMINATE' },
    ],
    ['a reset connection', { kind: 'reset' }, { failureClass: 'INDETERMINATE' }],
  ]
  for (const [name, behavior, expected] of cases)
    it(`maps ${name}`, async () => {
      fake.behave(() => behavior)
      expect(await send()).to.deep.include(expected)
    })

  it('maps an expired token (190) to a misconfiguration, without Meta text or the token', async () => {
    fake.expireToken()
    const refused = await send()
    expect(refused).to.deep.include({ failureClass: 'UNAVAILABLE', providerCode: 'WA190', effect: 'provider_misconfigured' })
    expect(JSON.stringify(refused)).to.not.include(TOKEN).and.not.include('fake Cloud API error').and.not.include('493027')
  })

  it('maps an unknown phone number id (Graph code 100, subcode 33) to a misconfiguration', async () => {
    connector.close()
    connector = connect(fake.url, undefined, '1055599999')
    expect(await send()).to.deep.include({ providerCode: 'WA100', effect: 'provider_misconfigured' })
  })

  it('maps a template that does not exist (132001) to a misconfiguration', async () => {
    connector.close()
    connector = connect(fake.url, 'no_such_template')
    expect(await send()).to.deep.include({ providerCode: 'WA132001', effect: 'provider_misconfigured' })
  })

  it('maps a timeout after the request was written to INDETERMINATE', async () => {
    fake.behave(() => ({ kind: 'accept-then-hang' }))
    expect(await send(MESSAGE, 200)).to.deep.include({ failureClass: 'INDETERMINATE', providerCode: 'Timeout' })
  })

  it('maps a refused connection to UNAVAILABLE: nothing was sent', async () => {
    connector.close()
    connector = connect(`http://127.0.0.1:${await freePort()}`)
    expect(await send()).to.deep.include({ failureClass: 'UNAVAILABLE', providerCode: 'ECONNREFUSED' })
  })
})
