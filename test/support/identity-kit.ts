import { expect } from 'chai'
import { createSessionTx } from '../../src/identity/sessions.ts'
import { createVerifiedIdentity, uniqueEmail } from './helpers.ts'
import { newestCode } from './sealed-codes.ts'
import { useWebStack } from './web-stack.ts'

/**
 * A web stack without a worker, on a clock the test moves, and what an attack on the identity
 * flows needs from it: calls, the newest sealed code to an address, signed-in identities and
 * fresh step-ups made through the real routes.
 */
export function useIdentityKit(options: { metricsToken?: string; trustProxy?: number } = {}) {
  let now = new Date()
  const clock = () => now
  const f = useWebStack({ worker: false, clock, ...options })
  beforeEach(() => {
    now = new Date()
  })
  // A failed attack shows the stack's last error lines (names and codes only: the logger writes no secret).
  afterEach(function () {
    if (this.currentTest?.state !== 'failed') return
    process.stdout.write(
      f.logs
        .text()
        .split('\n')
        .filter((line) => line.includes('"error"'))
        .slice(-5)
        .join('\n'),
    )
  })
  const call = (...args: Parameters<typeof f.stack.call>) => f.stack.call(...args)
  const code = (destination: string) => newestCode(f.db, f.keys, destination)

  return {
    f,
    call,
    code,
    now: () => now,
    /** Moves the stack's clock forward. */
    later: (seconds: number) => {
      now = new Date(now.getTime() + seconds * 1000)
    },
    /** A wrong code for sure: never the right one. */
    wrongFor: (right: string) => (right === '000000' ? '111111' : '000000'),
    /** A signed-in identity with a verified email and no password: its bearer header. */
    signedIn: async (email = uniqueEmail('member')) => {
      const { identityId } = await createVerifiedIdentity(f.db.owner, email)
      const { token } = await f.db.owner.transaction((trx) => createSessionTx(trx, identityId, now))
      return { email, identityId, auth: f.stack.bearer(token) }
    },
    /** A fresh step-up, as its owner makes it (the code from their own inbox): the headers of an elevated call. */
    elevate: async (who: { email: string; auth: Record<string, string> }) => {
      expect((await call('POST', '/step-ups', {}, who.auth)).status).to.equal(202)
      const confirmed = await call('POST', '/step-ups/confirmation', { code: await code(who.email) }, who.auth)
      expect(confirmed.status).to.equal(201)
      return { ...who.auth, 'x-elevation-token': String(confirmed.body!.elevationToken) }
    },
  }
}
