import { expect } from 'chai'
import { DeliveryFailureError, type OutgoingMessage, type Provider } from '../src/providers/provider.ts'
import { createTwilioConnector } from '../src/providers/twilio/connector.ts'
import { startFakeTwilio } from '../src/providers/twilio/fake.ts'
import { createWhatsAppCloudConnector } from '../src/providers/whatsapp-cloud/connector.ts'
import { startFakeWhatsAppCloud } from '../src/providers/whatsapp-cloud/fake.ts'

const PHONE: OutgoingMessage = {
  messageId: '01a22d1f-4e0c-7711-8dbc-3725e1d0239f',
  destination: '+447700900123',
  subject: '',
  text: 'Your code is 493021',
  purpose: 'sign_up',
  locale: 'en',
  code: '493021',
}

async function failureOf(provider: Provider): Promise<DeliveryFailureError> {
  const error: unknown = await provider.dispatch(PHONE, AbortSignal.timeout(5_000)).then(
    () => new Error('accepted'),
    (caught: unknown) => caught,
  )
  expect(error).to.be.instanceOf(DeliveryFailureError)
  return error as DeliveryFailureError
}

/**
 * Provider codes that are not about the request as it is, yet fell to the fault table's "any other
 * 4xx" (`request_refused`): each message dead-lettered at once while the provider looked healthy
 * (a REJECTED proves it is there), with no alarm and no failover (docs/delivery.md "Fault table").
 */
describe('attack: provider codes that are not the request’s fault (review2)', () => {
  it('Twilio 21611 (the sender’s queue is full, as a stranger’s sign-up flood leaves it) is a throttle, not a dead letter of every owner’s code', async () => {
    const accountSid = `AC${'a'.repeat(32)}`
    const fake = await startFakeTwilio({ accountSid, authToken: 'twilio-auth-token-0001' })
    const twilio = createTwilioConnector({
      apiUrl: fake.url,
      accountSid,
      credentials: { username: accountSid, password: 'twilio-auth-token-0001' },
      sender: { from: '+15005550006' },
      statusCallbackUrl: 'https://sealpost.example.com/webhooks/twilio',
    })
    try {
      fake.behave(() => ({ kind: 'error', status: 400, code: 21611 }))
      const failure = await failureOf(twilio)
      expect({ fault: failure.fault, failureClass: failure.failureClass }).to.deep.equal({ fault: 'throttled', failureClass: 'THROTTLED' })
    } finally {
      twilio.close()
      await fake.stop()
    }
  })

  it('WhatsApp Cloud API 131037 (our number’s display name is not approved) refuses us: held and alarmed, no person’s code dead-lettered', async () => {
    const account = { accessToken: 'cloud-access-token', phoneNumberId: '1055500000', template: 'sealpost_code' }
    const fake = await startFakeWhatsAppCloud(account)
    const cloud = createWhatsAppCloudConnector({ apiUrl: fake.url, ...account, languages: 'en:en_US' })
    try {
      fake.behave(() => ({ kind: 'error', status: 400, code: 131037 }))
      const failure = await failureOf(cloud)
      expect({ fault: failure.fault, effect: failure.effect }).to.deep.equal({
        fault: 'provider_misconfigured',
        effect: 'provider_misconfigured',
      })
    } finally {
      cloud.close()
      await fake.stop()
    }
  })
})
