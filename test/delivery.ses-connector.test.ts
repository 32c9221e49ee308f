import { expect } from 'chai'
import { createServer, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createSesConnector, fromHeader } from '../src/providers/ses/connector.ts'
import type { Fault } from '../src/providers/faults.ts'
import { classifySesError } from '../src/providers/ses/faults.ts'

describe('SES failure classification (rows of src/providers/faults.ts)', () => {
  const cases: [string, unknown, Fault][] = [
    ['MessageRejected', { name: 'MessageRejected', $metadata: { httpStatusCode: 400 } }, 'recipient_refused'],
    ['BadRequestException', { name: 'BadRequestException' }, 'request_refused'],
    [
      'a mistyped configuration set (NotFoundException)',
      { name: 'NotFoundException', $metadata: { httpStatusCode: 404 } },
      'provider_misconfigured',
    ],
    ['TooManyRequestsException', { name: 'TooManyRequestsException' }, 'throttled'],
    ['LimitExceededException', { name: 'LimitExceededException' }, 'throttled'],
    ['a bare 429', { name: 'Unknown', $metadata: { httpStatusCode: 429 } }, 'throttled'],
    ['403 on our credentials', { name: 'AccessDeniedException', $metadata: { httpStatusCode: 403 } }, 'provider_misconfigured'],
    ['an unknown access key', { name: 'UnrecognizedClientException', $metadata: { httpStatusCode: 403 } }, 'provider_misconfigured'],
    ['a bare 401 (a proxy in between)', { name: 'Unknown', $metadata: { httpStatusCode: 401 } }, 'provider_misconfigured'],
    ['a suspended account', { name: 'AccountSuspendedException' }, 'provider_misconfigured'],
    ['an unverified MAIL FROM domain', { name: 'MailFromDomainNotVerifiedException' }, 'provider_misconfigured'],
    ['a bare 413', { name: 'Unknown', $metadata: { httpStatusCode: 413 } }, 'request_refused'],
    ['a 503', { name: 'ServiceUnavailable', $metadata: { httpStatusCode: 503 } }, 'unavailable'],
    ['a 504', { name: 'GatewayTimeout', $metadata: { httpStatusCode: 504 } }, 'indeterminate'],
    ['a 2xx the SDK could not read', { name: 'SyntaxError', $metadata: { httpStatusCode: 200 } }, 'indeterminate'],
    ['something unknown', {}, 'indeterminate'],
  ]
  for (const [what, error, expected] of cases) {
    it(`classifies ${what} as ${expected}`, () => {
      expect(classifySesError(error).fault).to.equal(expected)
    })
  }
})

describe('SES SendEmail request', () => {
  it('carries the configuration set, the purpose and message id tags, both bodies and the From display name', async () => {
    let captured: Record<string, unknown> | undefined
    const server = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (chunk: Buffer) => chunks.push(chunk))
      req.on('end', () => {
        captured = JSON.parse(Buffer.concat(chunks).toString('utf8'))
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"MessageId":"ses-1"}')
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const { port } = server.address() as AddressInfo
    const ses = createSesConnector({
      region: 'eu-west-1',
      fromAddress: 'no-reply@sealpost.test',
      fromName: 'Sealpost "Beta"',
      configurationSet: 'sealpost-events',
      endpoint: `http://127.0.0.1:${port}`,
      credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
    })
    try {
      const id = '01a22d1f-4e0c-7711-8dbc-3725e1d0239f'
      const result = await ses.dispatch(
        { messageId: id, destination: 'a@example.com', subject: 'S', text: 'T', html: '<p>H</p>', purpose: 'sign_up' },
        AbortSignal.timeout(5_000),
      )
      expect(result.providerMessageId).to.equal('ses-1')
      expect(captured).to.deep.include({
        FromEmailAddress: '"Sealpost \\"Beta\\"" <no-reply@sealpost.test>',
        ConfigurationSetName: 'sealpost-events',
        EmailTags: [
          { Name: 'purpose', Value: 'sign_up' },
          { Name: 'message_id', Value: id },
        ],
      })
      expect(captured!.Content).to.deep.equal({
        Simple: {
          Subject: { Data: 'S', Charset: 'UTF-8' },
          Body: { Text: { Data: 'T', Charset: 'UTF-8' }, Html: { Data: '<p>H</p>', Charset: 'UTF-8' } },
        },
      })
    } finally {
      ses.close()
      server.close()
    }
  })

  it('encodes a display name that is not printable ASCII as an RFC 2047 word', () => {
    expect(fromHeader('a@b.test', undefined)).to.equal('a@b.test')
    expect(fromHeader('a@b.test', 'Größe')).to.equal(`=?UTF-8?B?${Buffer.from('Größe').toString('base64')}?= <a@b.test>`)
  })
})

describe('SES connections', () => {
  it('opens a socket per send slot: 100 sends at WORKER_CONCURRENCY 100 are all at the provider at once (the SDK default would hold 50 back)', async () => {
    const inFlight = new Set<ServerResponse>()
    let peak = 0
    const server = createServer((req, res) => {
      req.resume()
      req.on('end', () => {
        inFlight.add(res)
        peak = Math.max(peak, inFlight.size)
        // Answer everyone only once all 100 are held open together; a queued send would never arrive.
        if (inFlight.size === 100) {
          for (const held of inFlight) held.writeHead(200, { 'content-type': 'application/json' }).end('{"MessageId":"ses-n"}')
          inFlight.clear()
        }
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const { port } = server.address() as AddressInfo
    const ses = createSesConnector({
      region: 'eu-west-1',
      fromAddress: 'no-reply@sealpost.test',
      endpoint: `http://127.0.0.1:${port}`,
      credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
      concurrency: 100,
    })
    try {
      const sends = Array.from({ length: 100 }, (_, i) =>
        ses.dispatch(
          {
            messageId: `01a22d1f-4e0c-7711-8dbc-${String(i).padStart(12, '0')}`,
            destination: 'a@example.com',
            subject: 'S',
            text: 'T',
            html: '<p>H</p>',
            purpose: 'sign_up',
          },
          AbortSignal.timeout(10_000),
        ),
      )
      const results = await Promise.all(sends)
      expect(peak).to.equal(100)
      expect(results.map((result) => result.providerMessageId)).to.deep.equal(Array(100).fill('ses-n'))
    } finally {
      ses.close()
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
  })
})
