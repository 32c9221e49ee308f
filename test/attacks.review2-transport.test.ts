import { createServer, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { expect } from 'chai'
import { describeError } from '../src/logging/logger.ts'
import { DeliveryFailureError } from '../src/providers/provider.ts'
import { createSesConnector } from '../src/providers/ses/connector.ts'
import { eventually } from './support/helpers.ts'

const SECRET_KEY = 'ses-secret-access-key-never-shown'
const DESTINATION = 'person.secret@example.com'
const CODE = '493021'

/**
 * The SES connector's undici transport (src/providers/http.ts, ses/transport.ts), attacked where
 * "was the request written?" is hardest to tell: SES answers 200 and its body stalls until the
 * send's bound. SES acted; the failure must say it may have (`indeterminate`), never that it
 * cannot have (`unavailable`), and nothing secret may be in what is logged of it.
 */
describe('attack: SES answers and then stalls (review2)', () => {
  let server: Server
  let url: string
  const open = new Set<ServerResponse>()
  before(async () => {
    server = createServer((req, res) => {
      req.resume()
      req.on('end', () => {
        // SES took the message: the status line and headers go out, the body never ends.
        res.writeHead(200, { 'content-type': 'application/json', 'x-amzn-requestid': 'r-1' })
        res.write('{"MessageId":')
        open.add(res)
        res.once('close', () => open.delete(res))
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  after(async () => {
    for (const res of open) res.destroy()
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  })

  it('calls a send whose answer began and then stalled past the bound indeterminate (SES may have sent it), with no secret in it', async () => {
    const ses = createSesConnector({
      region: 'us-east-1',
      fromAddress: 'no-reply@sealpost.test',
      endpoint: url,
      credentials: { accessKeyId: 'AKIDREVIEW2', secretAccessKey: SECRET_KEY },
    })
    try {
      const error: unknown = await ses
        .dispatch(
          { messageId: '01a22d1f-4e0c-7711-8dbc-3725e1d0239f', destination: DESTINATION, subject: 'Code', text: `Your code is ${CODE}` },
          AbortSignal.timeout(500),
        )
        .then(
          () => new Error('accepted'),
          (caught: unknown) => caught,
        )
      expect(error).to.be.instanceOf(DeliveryFailureError)
      const failure = error as DeliveryFailureError
      for (const shown of [failure.message, JSON.stringify(describeError(failure)), failure.providerCode])
        for (const secret of [SECRET_KEY, DESTINATION, CODE, 'AKIDREVIEW2']) expect(shown).not.to.include(secret)
      expect({ fault: failure.fault, failureClass: failure.failureClass }).to.deep.equal({
        fault: 'indeterminate',
        failureClass: 'INDETERMINATE',
      })
      // The stalled answer's connection is given up with the send: it does not hold one of the agent's sockets.
      await eventually(async () => (open.size === 0 ? true : undefined), 'the stalled connection to close', 5_000)
    } finally {
      ses.close()
    }
  })
})
