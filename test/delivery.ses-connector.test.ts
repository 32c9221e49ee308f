import { expect } from 'chai'
import { createServer, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { classifySesError, createSesConnector, fromHeader } from '../src/providers/ses/connector.ts'

describe('SES failure classification', () => {
  const cases: [string, unknown, string][] = [
    ['MessageRejected', { name: 'MessageRejected', $metadata: { httpStatusCode: 400 } }, 'REJECTED'],
    ['BadRequestException', { name: 'BadRequestException' }, 'REJECTED'],
    ['NotFoundException', { name: 'NotFoundException' }, 'REJECTED'],
    ['TooManyRequestsException', { name: 'TooManyRequestsException' }, 'THROTTLED'],
    ['LimitExceededException', { name: 'LimitExceededException' }, 'THROTTLED'],
    ['a bare 429', { name: 'Unknown', $metadata: { httpStatusCode: 429 } }, 'THROTTLED'],
    ['403 on our credentials', { name: 'AccessDeniedException', $metadata: { httpStatusCode: 403 } }, 'UNAVAILABLE'],
    ['a suspended account', { name: 'AccountSuspendedException' }, 'UNAVAILABLE'],
    ['a 503', { name: 'ServiceUnavailable', $metadata: { httpStatusCode: 503 } }, 'UNAVAILABLE'],
    ['connection refused', { name: 'Error', code: 'ECONNREFUSED' }, 'UNAVAILABLE'],
    ['a 504', { name: 'GatewayTimeout', $metadata: { httpStatusCode: 504 } }, 'INDETERMINATE'],
    ['an abort', { name: 'AbortError' }, 'INDETERMINATE'],
    ['a reset', { name: 'Error', code: 'ECONNRESET' }, 'INDETERMINATE'],
    ['something unknown', {}, 'INDETERMINATE'],
  ]
  for (const [what, error, expected] of cases) {
    it(`classifies ${what} as ${expected}`, () => {
      expect(classifySesError(error).failureClass).to.equal(expected)
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
