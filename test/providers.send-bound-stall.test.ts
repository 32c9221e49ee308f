import { expect } from 'chai'
import { DeliveryFailureError } from '../src/providers/provider.ts'
import { createWasenderConnector } from '../src/providers/wasender/connector.ts'
import { startFakeWasender, type WasenderRequest } from '../src/providers/wasender/fake.ts'

const BOUND_MS = 300
const MESSAGE = { messageId: 'm-stall', destination: '+5491155554455', subject: 'Your code', text: 'Your code is 123456.' }

/** Holds the event loop (a worker busy starting up, GC, a long synchronous step) until `until` (performance.now()). */
function stallUntil(until: number): void {
  while (performance.now() < until) {
    /* the stall itself */
  }
}

/**
 * A worker's event loop stalls (a fresh worker on a loaded machine) while a send is in flight: the
 * provider's answer reaches the socket well within the send's bound, but the loop runs again only
 * after the bound's timer is due too. Node runs due timers before it reads sockets, so the timer
 * used to win: the send was cut off as INDETERMINATE though Wasender had taken it, and its retry
 * sent the message twice (test/worker.chaos.test.ts, "messages sent twice"). An answer that had
 * arrived when the bound ended must be read (docs/delivery.md "How a message travels").
 */
describe('a send bound whose timer is due only because the event loop stalled', () => {
  const apiKey = 'test-api-key-not-secret'
  let fake: Awaited<ReturnType<typeof startFakeWasender>>
  let connector: ReturnType<typeof createWasenderConnector>

  beforeEach(async () => {
    fake = await startFakeWasender(apiKey)
    connector = createWasenderConnector({ apiUrl: fake.url, apiKey })
    // One call first, so the send under test reuses a connected socket: its bound is spent on the answer only.
    await connector.dispatch({ ...MESSAGE }, AbortSignal.timeout(10_000))
  })
  afterEach(async () => {
    connector.close()
    await fake.stop()
  })

  it('reads the answer that arrived before the bound ended instead of calling the send indeterminate', async () => {
    let answered: WasenderRequest | undefined
    let deadline = 0
    fake.behave((_call, request) => {
      answered = request
      // Once the fake has written its 200 (it marks the request accepted as it writes it), the loop stalls past the bound.
      const stallOnceWritten = () => (request.accepted ? stallUntil(deadline + 50) : setImmediate(stallOnceWritten))
      setImmediate(stallOnceWritten)
      return { kind: 'accept' }
    })
    deadline = performance.now() + BOUND_MS
    const result = await connector.dispatch({ ...MESSAGE }, AbortSignal.timeout(BOUND_MS)).catch((error: unknown) => {
      if (error instanceof DeliveryFailureError) return { failureClass: error.failureClass }
      throw error
    })
    // The stall really covered the bound's end, with Wasender's answer already written.
    expect(answered?.accepted, 'Wasender took the message').to.equal(true)
    expect(performance.now()).to.be.above(deadline)
    expect(result).to.deep.equal({ providerMessageId: '2' })
  })

  it('still ends a send whose answer had not come when the bound ended (a hang), as indeterminate', async () => {
    fake.behave(() => ({ kind: 'hang' }))
    const error: unknown = await connector.dispatch({ ...MESSAGE }, AbortSignal.timeout(BOUND_MS)).then(
      () => new Error('accepted'),
      (caught: unknown) => caught,
    )
    expect(error).to.be.instanceOf(DeliveryFailureError)
    expect((error as DeliveryFailureError).failureClass).to.equal('INDETERMINATE')
  })
})
