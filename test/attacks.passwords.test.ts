import { expect } from 'chai'
import { createHash } from 'node:crypto'
import { createTestDatabase, type TestDatabase } from './support/database.ts'
import { startFakePwnedPasswords } from './support/fake-pwned-passwords.ts'
import { capturingLogger, createVerifiedIdentity, testKeys, uniqueEmail } from './support/helpers.ts'
import { newestCode } from './support/sealed-codes.ts'
import { startWebStack } from './support/web-stack.ts'

const sha1 = (password: string) => createHash('sha1').update(password, 'utf8').digest('hex').toUpperCase()

/**
 * Passwords people cannot guess (ASVS 2.1.1, 2.1.7): at least 12 characters, and none the Pwned
 * Passwords range API lists as breached, on every route that sets one, through the real web
 * against a local fake of that API.
 */
describe('attacks on passwords: short and breached ones', () => {
  const keys = testKeys()
  const logs = capturingLogger()
  const breached = 'password1234!'
  const paddedOnly = 'listed only as padding, count 0'
  let db: TestDatabase
  let range: Awaited<ReturnType<typeof startFakePwnedPasswords>>
  let stack: Awaited<ReturnType<typeof startWebStack>>

  before(async () => {
    range = await startFakePwnedPasswords({ breached: [breached], padded: [paddedOnly] })
    db = await createTestDatabase()
    stack = await startWebStack(db, {
      keys,
      logger: logs.logger,
      worker: false,
      passwords: { BREACHED_PASSWORD_API_URL: range.url, BREACHED_PASSWORD_TIMEOUT_MS: 300 },
    })
  })
  beforeEach(() => range.behave(() => ({ kind: 'answer' })))
  after(async () => {
    await stack?.stop()
    await range?.stop()
    await db?.drop()
  })

  const written = async (identifier: string) => ({
    claims: (await db.owner('identity.login_identifiers').where({ value: identifier })).length,
    messages: (await db.owner('outbox.security_outbox_messages').where({ destination: identifier })).length,
  })
  const passwordHashOf = async (identityId: string) =>
    (await db.owner('identity.password_credentials').where({ identity_id: identityId }).first())?.password_hash as string | undefined
  const recoveryCode = async (identifier: string) => {
    expect((await stack.call('POST', '/password-recoveries', { identifier })).status).to.equal(202)
    return await newestCode(db, keys, identifier)
  }

  it('guessing made easy by a short password: an 11-character one is refused 422 weak_password on sign-up, alike for a free and a taken address, nothing written', async () => {
    const owner = uniqueEmail('owner')
    await createVerifiedIdentity(db.owner, owner)
    const free = uniqueEmail('free')
    const lookups = range.requests.length
    const answers = []
    for (const identifier of [free, owner]) {
      const answer = await stack.call('POST', '/sign-ups', { identifier, password: 'elevenchars' })
      answers.push({ status: answer.status, body: answer.body, type: answer.headers.get('content-type') })
    }
    expect(answers[0]).to.deep.include({ status: 422 })
    expect(answers[0]!.body).to.include({ code: 'weak_password' })
    expect(answers[1], 'a taken address answers exactly like a free one').to.deep.equal(answers[0])
    expect(await written(free)).to.deep.equal({ claims: 0, messages: 0 })
    expect(await written(owner)).to.deep.equal({ claims: 1, messages: 0 })
    expect(range.requests.length, 'a short password is never looked up').to.equal(lookups)
  })

  it('twelve spaces or a 12-character password of combining accents that NFC folds to 6 are short; 12 emoji are long enough', async () => {
    const statusOf = async (password: string) => (await stack.call('POST', '/sign-ups', { identifier: uniqueEmail(), password })).status
    expect(await statusOf(' '.repeat(12))).to.equal(422)
    expect(await statusOf('e\u0301'.repeat(6))).to.equal(422)
    expect(await statusOf('🦄'.repeat(12))).to.equal(202)
  })

  it('a short new password on recovery completion is refused 422 weak_password before the code is looked at: the password is unchanged and the code still works', async () => {
    const owner = uniqueEmail('recovering')
    const { identityId } = await createVerifiedIdentity(db.owner, owner)
    const code = await recoveryCode(owner)
    const before = await passwordHashOf(identityId)
    const refused = await stack.call('POST', '/password-recoveries/completion', { identifier: owner, code, newPassword: 'elevenchars' })
    expect([refused.status, refused.body?.code]).to.deep.equal([422, 'weak_password'])
    expect(await passwordHashOf(identityId), 'the password is unchanged').to.equal(before)
    const fine = 'a long and unlisted passphrase'
    expect((await stack.call('POST', '/password-recoveries/completion', { identifier: owner, code, newPassword: fine })).status).to.equal(
      204,
    )
    expect((await stack.call('POST', '/sessions', { identifier: owner, password: fine })).status).to.equal(201)
  })

  it('credential stuffing with a breached password: it is refused 422 breached_password on sign-up and on recovery completion, nothing written', async () => {
    const free = uniqueEmail('stuffed')
    const signUp = await stack.call('POST', '/sign-ups', { identifier: free, password: breached })
    expect([signUp.status, signUp.body?.code]).to.deep.equal([422, 'breached_password'])
    expect(await written(free)).to.deep.equal({ claims: 0, messages: 0 })

    const owner = uniqueEmail('owner')
    const { identityId } = await createVerifiedIdentity(db.owner, owner)
    const code = await recoveryCode(owner)
    const refused = await stack.call('POST', '/password-recoveries/completion', { identifier: owner, code, newPassword: breached })
    expect([refused.status, refused.body?.code]).to.deep.equal([422, 'breached_password'])
    expect(await passwordHashOf(identityId)).to.equal(undefined)
  })

  it('a password the range lists only as padding (count 0) is no breach: the sign-up is accepted', async () => {
    expect((await stack.call('POST', '/sign-ups', { identifier: uniqueEmail(), password: paddedOnly })).status).to.equal(202)
  })

  it('the range API learns five hex digits of the SHA-1, asked with padding and a user agent: never the password, its hash or the rest of it', async () => {
    const password = 'my own quite unguessable passphrase'
    const from = range.requests.length
    expect((await stack.call('POST', '/sign-ups', { identifier: uniqueEmail(), password })).status).to.equal(202)
    const seen = range.requests.slice(from)
    expect(seen.map((request) => request.url)).to.deep.equal([`/range/${sha1(password).slice(0, 5)}`])
    expect(seen[0]!.headers).to.include({ 'add-padding': 'true' })
    expect(seen[0]!.headers['user-agent']).to.match(/^Sealpost/)
    const everything = JSON.stringify(seen).toUpperCase()
    for (const secret of [password.toUpperCase(), sha1(password), sha1(password).slice(5)]) expect(everything).not.to.include(secret)
  })

  it('the range API down (500) or silent past its timeout: the password is accepted (fail-open), logged as a warning without secrets, and counted', async () => {
    const before = logs.text().length
    const passwords = ['accepted while the API fails', 'accepted while the API hangs']
    range.behave(() => ({ kind: 'status', status: 500 }))
    expect((await stack.call('POST', '/sign-ups', { identifier: uniqueEmail(), password: passwords[0] })).status).to.equal(202)
    range.behave(() => ({ kind: 'hang' }))
    const started = Date.now()
    expect((await stack.call('POST', '/sign-ups', { identifier: uniqueEmail(), password: passwords[1] })).status).to.equal(202)
    expect(Date.now() - started, 'bounded by BREACHED_PASSWORD_TIMEOUT_MS').to.be.below(5_000)

    const logged = logs.text().slice(before)
    const warnings = logged.split('\n').filter((line) => line.includes('breached-password check unavailable'))
    expect(warnings).to.have.length(2)
    expect(warnings[0]).to.include('"status":500')
    expect(warnings[1]).to.include('"errorName":"Timeout"')
    for (const password of passwords) {
      for (const secret of [password, sha1(password), sha1(password).toLowerCase()]) expect(logged).not.to.include(secret)
      for (const warning of warnings) expect(warning.toUpperCase()).not.to.include(sha1(password).slice(0, 5))
    }
    const metrics = await (await fetch(`${stack.web.url}/metrics`)).text()
    expect(metrics).to.match(/sealpost_breached_password_checks_total\{outcome="unavailable"\} 2\b/)
  })
})
