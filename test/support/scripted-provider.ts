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
