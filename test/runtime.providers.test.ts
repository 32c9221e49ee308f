import { expect } from 'chai'
import { DeliveryFailureError } from '../src/providers/provider.ts'
import { startFakeTwilio } from '../src/providers/twilio/fake.ts'
import { loadConfig } from '../src/providers/config.ts'
import { providersFromConfig } from '../src/providers/wiring.ts'
import { startFakeSmtp, type FakeSmtp } from './support/fake-smtp.ts'

describe('providers from configuration', () => {
  const message = { messageId: '01a22d1f-4e0c-7711-8dbc-3725e1d0239f', destination: 'a@example.com', subject: 'S', text: 'T' }
  let fake: FakeSmtp | undefined
  const closers: (() => void)[] = []
  afterEach(async () => {
    closers.splice(0).forEach((close) => close())
    await fake?.close()
    fake = undefined
  })
  const build = (env: Record<string, string>) => {
    const providers = providersFromConfig(loadConfig(env, 'worker'))
    closers.push(...providers.map((provider) => () => provider.close()))
    return providers
  }

  it('builds the email providers in EMAIL_PROVIDERS order, then WhatsApp', () => {
    const env = { NODE_ENV: 'test', SMTP_URL: 'smtp://127.0.0.1:2525', WASENDER_API_URL: 'http://127.0.0.1:9', WASENDER_API_KEY: 'k' }
    expect(build({ ...env, EMAIL_PROVIDERS: 'smtp,ses' }).map((p) => `${p.channel}:${p.id}`)).to.deep.equal([
      'email:smtp',
      'email:ses',
      'whatsapp:wasender',
    ])
    expect(build({ ...env, EMAIL_PROVIDERS: 'ses,smtp' }).map((p) => p.id)).to.deep.equal(['ses', 'smtp', 'wasender'])
    expect(build({ NODE_ENV: 'test' }).map((p) => p.id)).to.deep.equal(['ses'])
  })

  it('builds the WhatsApp provider WHATSAPP_PROVIDER names: the Cloud API or Wasender, never both', () => {
    const env = {
      NODE_ENV: 'test',
      WASENDER_API_URL: 'http://127.0.0.1:9',
      WASENDER_API_KEY: 'k',
      WHATSAPP_CLOUD_API_URL: 'http://127.0.0.1:9',
      WHATSAPP_CLOUD_ACCESS_TOKEN: 't',
      WHATSAPP_CLOUD_PHONE_NUMBER_ID: '1055500000',
      WHATSAPP_CLOUD_TEMPLATE: 'sealpost_code',
    }
    expect(build({ ...env, WHATSAPP_PROVIDER: 'cloud' }).map((p) => `${p.channel}:${p.id}`)).to.deep.equal([
      'email:ses',
      'whatsapp:whatsapp_cloud',
    ])
    expect(build({ ...env, WHATSAPP_PROVIDER: 'wasender' }).map((p) => p.id)).to.deep.equal(['ses', 'wasender'])
    const cloudOnly: Record<string, string> = { ...env }
    delete cloudOnly.WASENDER_API_URL
    delete cloudOnly.WASENDER_API_KEY
    expect(build(cloudOnly).map((p) => p.id)).to.deep.equal(['ses', 'whatsapp_cloud'])
  })

  it("adds Twilio for sms when TWILIO_* is set: an API key sends, the callback URL is PUBLIC_BASE_URL's", async () => {
    const accountSid = `AC${'d'.repeat(32)}`
    const apiKey = { sid: `SK${'e'.repeat(32)}`, secret: 'twilio-api-key-secret' }
    const twilio = await startFakeTwilio({ accountSid, authToken: 'twilio-auth-token', apiKey })
    closers.push(() => void twilio.stop())
    const providers = build({
      NODE_ENV: 'test',
      TWILIO_ACCOUNT_SID: accountSid,
      TWILIO_AUTH_TOKEN: 'twilio-auth-token',
      TWILIO_API_KEY_SID: apiKey.sid,
      TWILIO_API_KEY_SECRET: apiKey.secret,
      TWILIO_MESSAGING_SERVICE_SID: `MG${'f'.repeat(32)}`,
      TWILIO_API_URL: twilio.url,
      PUBLIC_BASE_URL: 'https://sealpost.example.com/',
    })
    expect(providers.map((p) => `${p.channel}:${p.id}`)).to.deep.equal(['email:ses', 'sms:twilio'])
    await providers[1]!.dispatch({ ...message, destination: '+5491155554455' }, AbortSignal.timeout(5_000))
    expect(twilio.accepted()[0]).to.include({
      statusCallback: 'https://sealpost.example.com/webhooks/twilio',
      authorization: `Basic ${Buffer.from(`${apiKey.sid}:${apiKey.secret}`).toString('base64')}`,
    })
  })

  it('sends plain to a loopback relay in test, and from SMTP_FROM_ADDRESS', async () => {
    fake = await startFakeSmtp({ tls: 'none' })
    const [smtp] = build({
      NODE_ENV: 'test',
      EMAIL_PROVIDERS: 'smtp',
      SMTP_URL: `smtp://127.0.0.1:${fake.port}`,
      SMTP_FROM_ADDRESS: 'codes@sealpost.test',
    })
    await smtp!.dispatch(message, AbortSignal.timeout(5_000))
    expect(fake.accepted().map((mail) => [mail.from, mail.secure])).to.deep.equal([['codes@sealpost.test', false]])
  })

  it('requires STARTTLS of the same loopback relay in production: nothing goes out in clear', async () => {
    fake = await startFakeSmtp({ tls: 'none' })
    const [smtp] = build({
      NODE_ENV: 'production',
      WORKER_DATABASE_URL: 'postgres://worker:pw@db.internal/sealpost',
      OUTBOX_ENCRYPTION_KEY: Buffer.alloc(32, 1).toString('base64'),
      WASENDER_API_URL: 'https://wasender.example.com',
      WASENDER_API_KEY: 'k',
      INVITATION_LINK_BASE_URL: 'https://app.example.com',
      EMAIL_PROVIDERS: 'smtp',
      SMTP_URL: `smtp://127.0.0.1:${fake.port}`,
      SMTP_FROM_ADDRESS: 'codes@example.com',
    })
    const failure = await smtp!.dispatch(message, AbortSignal.timeout(5_000)).then(
      () => null,
      (error: unknown) => error,
    )
    expect(failure).to.be.instanceOf(DeliveryFailureError).and.to.include({ failureClass: 'UNAVAILABLE', providerCode: 'ETLS' })
    expect(fake.received).to.deep.equal([])
  })
})
