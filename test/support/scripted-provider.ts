import type { OutgoingMessage, Provider } from '../../src/delivery/provider.ts'

/** A provider port that answers whatever the test scripts, and remembers what it was asked. */
export function scriptedProvider(script: (call: number) => { providerMessageId: string } | Error): Provider & { calls: OutgoingMessage[] } {
  const calls: OutgoingMessage[] = []
  return {
    id: 'scripted',
    channel: 'email',
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
    id: 'stalled',
    channel: 'email',
    async dispatch() {
      entered()
      await gate
      return { providerMessageId }
    },
  }
  return { provider, sending, release }
}
