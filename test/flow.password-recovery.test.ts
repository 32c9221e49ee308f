import { expect } from 'chai'
import { verifyCode } from '../src/crypto/codes.ts'
import { createSesConnector } from '../src/providers/ses/connector.ts'
import { startSesEmulator } from '../src/providers/ses/emulator.ts'
import { startWeb, type RunningWeb } from '../src/runtime/web.ts'
import { startWorker, type RunningWorker } from '../src/runtime/worker.ts'
import { createTestDatabase, type TestDatabase } from './support/database.ts'
import { capturingLogger, createVerifiedIdentity, eventually, inbox, testKeys, uniqueEmail, workerConfig } from './support/helpers.ts'
import { checkedFetch } from './support/api-check.ts'

const WORKER_CONFIG = workerConfig()

describe('password recovery, from HTTP request to inbox', () => {
  let db: TestDatabase
  let emulator: Awaited<ReturnType<typeof startSesEmulator>>
  let web: RunningWeb
  let worker: RunningWorker
  const keys = testKeys()
  const logs = capturingLogger()
  const ses = () =>
    createSesConnector({
      region: 'us-east-1',
      fromAddress: 'no-reply@sealpost.test',
      endpoint: emulator.url,
      credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
    })

  before(async () => {
    db = await createTestDatabase()
    emulator = await startSesEmulator(0)
    worker = await startWorker({ config: WORKER_CONFIG, workerUrl: db.workerUrl, keys, providers: [ses()], logger: logs.logger })
    web = await startWeb({
      config: { NODE_ENV: 'test', PORT: 0, CHALLENGE_TTL_SECONDS: 600, INVITATION_TTL_SECONDS: 3_600, CLIENT_RATE_LIMIT_PER_MINUTE: 1_000 },
      apiUrl: db.apiUrl,
      keys,
      logger: logs.logger,
      host: '127.0.0.1',
    })
  })

  after(async () => {
    await web?.stop()
    await worker?.stop()
    await emulator?.stop()
    await db?.drop()
  })

  const requestRecovery = (identifier: string) =>
    checkedFetch(`${web.url}/password-recoveries`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ identifier }),
    })

  it('delivers a 6-digit code that verifies, publishes the message, deletes its ciphertext and completes the job', async () => {
    const email = uniqueEmail('alice')
    await createVerifiedIdentity(db.owner, email)

    const response = await requestRecovery(email.toUpperCase())
    expect(response.status).to.equal(202)
    const body = (await response.json()) as { challengeExpiresAt: string }
    expect(Object.keys(body)).to.deep.equal(['challengeExpiresAt'])

    const [delivered] = await eventually(async () => {
      const mails = await inbox(emulator.url, email)
      return mails.length > 0 ? mails : undefined
    }, 'the email to arrive')
    expect(delivered!.subject).to.equal('Your password recovery code')
    const code = /\b(\d{6})\b/.exec(delivered!.body.text ?? '')?.[1]
    expect(code, 'a 6-digit code in the body').to.match(/^\d{6}$/)

    const challenge = await db.owner('identity.challenges').where({ purpose: 'password_recovery' }).first()
    expect(verifyCode(keys.codeHashKey, challenge.id, code!, challenge.code_hash)).to.equal(true)
    expect(verifyCode(keys.codeHashKey, challenge.id, code === '000000' ? '000001' : '000000', challenge.code_hash)).to.equal(false)
    expect(new Date(body.challengeExpiresAt).getTime()).to.equal(challenge.expires_at.getTime())

    const message = await eventually(async () => {
      const row = await db.owner('outbox.security_outbox_messages').where({ challenge_id: challenge.id }).first()
      return row?.state === 'published' ? row : undefined
    }, 'the message to be published')
    expect(message).to.include({ purpose: 'password_recovery', channel: 'email', destination: email, attempt_count: 1 })
    expect(await db.owner('outbox.security_outbox_ciphertexts').where({ message_id: message.id })).to.have.length(0)
    const attempts = await db.owner('outbox.security_outbox_attempts').where({ message_id: message.id })
    expect(attempts).to.have.length(1)
    expect(attempts[0]).to.include({ attempt_no: 1, outcome: 'published', failure_class: null, provider_message_id: delivered!.messageId })

    const jobs = await db.owner('pgboss.job').where({ name: 'security-outbox' }).whereRaw("data->>'messageId' = ?", [message.id])
    expect(jobs).to.have.length(1)
    expect(jobs[0].state).to.equal('completed')
    expect(jobs[0].data).to.deep.equal({ messageId: message.id })

    // Acceptance 6: nothing secret or personal reached a log line during the flow.
    const logged = logs.text()
    expect(logged).to.include('delivery recorded')
    expect(logged).not.to.include(code!)
    expect(logged.toLowerCase()).not.to.include(email.toLowerCase())
  })

  it('answers an unknown identifier with the same status and body keys, and enqueues nothing', async () => {
    const known = uniqueEmail('known')
    await createVerifiedIdentity(db.owner, known)
    const count = async () => ({
      challenges: Number((await db.owner('identity.challenges').count({ n: '*' }))[0]!.n),
      messages: Number((await db.owner('outbox.security_outbox_messages').count({ n: '*' }))[0]!.n),
      jobs: Number((await db.owner('pgboss.job').where({ name: 'security-outbox' }).count({ n: '*' }))[0]!.n),
    })
    const before = await count()

    const unknownResponse = await requestRecovery(uniqueEmail('nobody'))
    const unknownBody = (await unknownResponse.json()) as Record<string, unknown>
    expect(await count(), 'unknown identifier enqueues nothing').to.deep.equal(before)

    const knownResponse = await requestRecovery(known)
    const knownBody = (await knownResponse.json()) as Record<string, unknown>
    expect(unknownResponse.status).to.equal(knownResponse.status).and.to.equal(202)
    expect(Object.keys(unknownBody)).to.deep.equal(Object.keys(knownBody))
    expect(unknownResponse.headers.get('content-type')).to.equal(knownResponse.headers.get('content-type'))
    expect(await count(), 'known identifier enqueues one of each').to.deep.equal({
      challenges: before.challenges + 1,
      messages: before.messages + 1,
      jobs: before.jobs + 1,
    })
  })
})
