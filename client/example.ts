import { bearer, createSealpostClient } from './index.ts'

const api = createSealpostClient(process.env.SEALPOST_URL ?? 'http://127.0.0.1:3000')

// Ask for a password-recovery code: the same 202 whether or not the account exists.
const recovery = await api.POST('/password-recoveries', { body: { identifier: 'alice@example.com' } })
if (recovery.error) throw new Error(`refused: ${recovery.error.code}`)
console.log('a code is on its way; it expires at', recovery.data.challengeExpiresAt)

// Refusals are typed problems: `code` is one of the values the document lists for that status.
const signIn = await api.POST('/sessions', { body: { identifier: 'alice@example.com', password: 'not her password' } })
if (signIn.error) console.log('sign-in refused:', signIn.response.status, signIn.error.code)

// Signed-in calls carry the session token.
const signOut = await api.DELETE('/sessions/current', { headers: bearer('not-a-real-session-token') })
console.log('sign-out without a session:', signOut.response.status, signOut.error?.code)
