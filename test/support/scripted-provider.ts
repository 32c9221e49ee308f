import type { OutgoingMessage, Provider } from '../../src/providers/provider.ts'

/**
 * A provider port that answers whatever the test scripts, and remembers what it was asked. It
 * stands in for a real provider id (attempt rows name one of them): SES unless told otherwise.
 */
export function scriptedProvider(
  script: (call: number) => { providerMessageId: string } | Error,
  as: Pick<Provider, 'id' | 'channel'> = { id: 'ses', channel: 'email' },
): Provider & { calls: OutgoingMessage[] } {
  const calls: OutgoingMessage[] = []
  return {
    ...as,
    calls,
    async dispatch(message) {
      calls.push(message)
      const answer = script(calls.length)
      if (answer instanceof Error) throw answer
      return answer
    },
  }
}

/**
 * A provider whose send stalls until the test releases it: `sending` resolves once the worker is
 * inside its provider call, `release()` lets the call return `providerMessageId`.
 */
export function stalledProvider(providerMessageId: string): { provider: Provider; sending: Promise<void>; release: () => void } {
  let release: () => void = () => {}
  let entered: () => void = () => {}
  const gate = new Promise<void>((resolve) => (release = resolve))
  const sending = new Promise<void>((resolve) => (entered = resolve))
  const provider: Provider = {
    id: 'ses',
    channel: 'email',
    async dispatch() {
      entered()
      await gate
      return { providerMessageId }
    },
  }
  return { provider, sending, release }
}
