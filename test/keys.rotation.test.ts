import { randomBytes } from 'node:crypto'
import { expect } from 'chai'
import type { KeyRing } from '../src/crypto/key-ring.ts'
import { parseIdentifier } from '../src/identity/identifiers.ts'
import { requestPasswordRecovery } from '../src/identity/password-recovery.ts'
import { useProcessFixture } from './support/process-fixture.ts'
import { createVerifiedIdentity, editMessageBypassingTrigger, eventually, inbox, ringSetting, uniqueEmail } from './support/helpers.ts'
import type { Spawned } from './support/processes.ts'

/**
 * docs/operations.md "Rotating keys", run as an operator would, with the Procfile processes:
 * add the new key second → deploy → move it first → wait the longest TTL → drop the old one,
 * with messages sealed and codes hashed under the old key in flight at every step.
 */
describe('key rotation with live messages', () => {
  const f = useProcessFixture({ harness: true })
  const outbox = { a: { id: 'a', key: randomBytes(32) }, b: { id: 'b', key: randomBytes(32) } }
  const hash = { a: { id: 'a', key: randomBytes(32) }, b: { id: 'b', key: randomBytes(32) } }
  const running: Spawned[] = []

  afterEach(async () => {
    for (const process of running.splice(0)) {
      process.child.kill('SIGTERM')
      await process.exited
    }
  })

  const rings = (outboxRing: KeyRing, hashRing: KeyRing) => ({
    OUTBOX_ENCRYPTION_KEYS: ringSetting(outboxRing),
    CODE_HASH_KEYS: ringSetting(hashRing),
  })
  async function web(settings: Record<string, string>): Promise<string> {
    const process = f.web(settings)
    running.push(process)
    const [, url] = await process.waitFor(/"url":"(http:\/\/[^"]+)"/, 'the web process to listen')
    return url!
  }
  async function worker(settings: Record<string, string>): Promise<Spawned> {
    const process = f.worker(settings)
    running.push(process)
    await process.waitFor(/"message":"worker started"/, 'the worker to start')
    return process
  }
  async function stop(process: Spawned): Promise<void> {
    running.splice(running.indexOf(process), 1)
    process.child.kill('SIGTERM')
    await process.exited
  }
  const post = (url: string, path: string, body: unknown) =>
    fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
  async function recover(url: string, email: string): Promise<string> {
    expect((await post(url, '/password-recoveries', { identifier: email })).status).to.equal(202)
    const message = await f.db.owner('outbox.security_outbox_messages').where({ destination: email }).orderBy('created_at', 'desc').first()
    return message.id as string
  }
  const complete = async (url: string, email: string, code: string) =>
    (await post(url, '/password-recoveries/completion', { identifier: email, code, newPassword: 'a brand new passphrase' })).status
  async function codeSentTo(email: string): Promise<string> {
    const [sent] = await eventually(
      async () => {
        const emails = await inbox(f.emulator.url, email)
        return emails.length > 0 ? emails : undefined
      },
      `a code for ${email}`,
      20_000,
    )
    return /\b(\d{6})\b/.exec(sent!.body.text ?? '')![1]!
  }
  const envelopeOf = async (messageId: string) =>
    (await f.db.owner('outbox.security_outbox_ciphertexts').where({ message_id: messageId }).first())?.envelope as string | undefined
  const state = async (messageId: string) =>
    (await f.db.owner('outbox.security_outbox_messages').where({ id: messageId }).first()).state as string
  /** README's check before dropping key `id`: no open message is still sealed under it. */
  const sealedUnder = async (id: string) =>
    Number(
      (
        await f.db
          .owner('outbox.security_outbox_ciphertexts')
          .count({ n: '*' })
          .where('envelope', 'like', `v2.${id}.%`)
          .orWhere('envelope', 'like', 'v1.%')
      )[0]!.n,
    )
  const person = async () => {
    const email = uniqueEmail('rotation')
    await createVerifiedIdentity(f.db.owner, email)
    return email
  }

  it('delivers every message and verifies every code across the whole procedure; a key dropped too early fails closed', async function () {
    this.timeout(240_000)
    // Before: one key each. A code is requested while no worker runs.
    const before = rings([outbox.a], [hash.a])
    let url = await web(before)
    const p0 = await person()
    const m0 = await recover(url, p0)
    expect(await envelopeOf(m0)).to.match(/^v2\.a\./)
    await stop(running[0]!)

    // Step 1: the new key is added second, everywhere. The old key still seals and hashes.
    const step1 = rings([outbox.a, outbox.b], [hash.a, hash.b])
    url = await web(step1)
    let delivering = await worker(step1)
    expect(await complete(url, p0, await codeSentTo(p0)), 'a code hashed before step 1 verifies').to.equal(204)
    await stop(delivering)
    const p1 = await person()
    const m1 = await recover(url, p1)
    expect(await envelopeOf(m1)).to.match(/^v2\.a\./)
    const lingering = await person()
    await recover(url, lingering)
    for (const process of running.splice(0)) {
      process.child.kill('SIGTERM')
      await process.exited
    }

    // Step 2: the new key moves first. A worker still on step 1 (a rolling deploy) opens the
    // new key's envelopes, and the step-2 worker opens the old key's.
    const step2 = rings([outbox.b, outbox.a], [hash.b, hash.a])
    url = await web(step2)
    const p2 = await person()
    const m2 = await recover(url, p2)
    expect(await envelopeOf(m2)).to.match(/^v2\.b\./)
    const straggler = await worker(step1)
    await eventually(
      async () => ((await state(m2)) === 'published' ? true : undefined),
      'the step-1 worker to deliver a step-2 message',
      20_000,
    )
    await stop(straggler)
    delivering = await worker(step2)
    expect(await complete(url, p1, await codeSentTo(p1)), 'a code hashed under the old key, sealed under it, verifies at step 2').to.equal(
      204,
    )
    expect(await complete(url, p2, await codeSentTo(p2))).to.equal(204)
    const lingeringCode = await codeSentTo(lingering)
    await stop(delivering)
    const p3 = await person()
    const m3 = await recover(url, p3)

    // Step 3: wait the longest TTL. Here every old-key message is final already; the README's
    // query says when that is so.
    expect(await sealedUnder('a'), 'no open message sealed under the old key').to.equal(0)
    for (const process of running.splice(0)) {
      process.child.kill('SIGTERM')
      await process.exited
    }

    // Step 4: the old key is dropped.
    const after = rings([outbox.b], [hash.b])
    url = await web(after)
    delivering = await worker(after)
    expect(await complete(url, p3, await codeSentTo(p3)), 'a new-key message and code after the drop').to.equal(204)
    expect(await state(m3)).to.equal('published')
    expect(
      await complete(url, lingering, lingeringCode),
      'a code hashed under a dropped key no longer verifies: why step 3 waits',
    ).to.equal(422)

    // Dropped too early: a message still sealed under the old key is dead-lettered, never sent.
    const early = await person()
    await f.harness.api.transaction((trx) =>
      requestPasswordRecovery(
        trx,
        {
          boss: f.harness.webBoss,
          outboxKey: [outbox.a],
          codeHashKey: hash.a.key,
          challengeTtlSeconds: 600,
          clock: () => new Date(),
          logger: f.logs.logger,
          channels: new Set(['email']),
        },
        parseIdentifier(early)!,
      ),
    )
    const stranded = (await f.db.owner('outbox.security_outbox_messages').where({ destination: early }).first()).id as string
    await eventually(
      async () => ((await state(stranded)) === 'dead_lettered' ? true : undefined),
      'the stranded message to be dead-lettered',
      20_000,
    )
    expect(await f.db.owner('outbox.security_outbox_dead_letters').where({ message_id: stranded }).first()).to.include({
      reason: 'decryption_failed',
    })
    expect(await inbox(f.emulator.url, early)).to.deep.equal([])
    expect(delivering.output())
      .to.match(/"security":true/)
      .and.to.include('SECURITY: security outbox envelope failed to open')
    for (const key of [outbox.a.key, outbox.b.key, hash.a.key, hash.b.key]) {
      expect(running.map((process) => process.output()).join('')).not.to.include(key.toString('base64'))
    }
  })

  it('refuses the edited-destination attack: a pending message pointed elsewhere in the database is dead-lettered decryption_failed and nothing is sent', async function () {
    this.timeout(60_000)
    const settings = rings([outbox.b], [hash.b])
    const url = await web(settings)
    const victim = await person()
    const attacker = uniqueEmail('attacker')
    const messageId = await recover(url, victim)
    await editMessageBypassingTrigger(f.db.owner, messageId, { destination: attacker })

    const delivering = await worker(settings)
    await eventually(
      async () => ((await state(messageId)) === 'dead_lettered' ? true : undefined),
      'the edited message to be dead-lettered',
      20_000,
    )
    expect(await f.db.owner('outbox.security_outbox_dead_letters').where({ message_id: messageId }).first()).to.include({
      reason: 'decryption_failed',
    })
    expect(await inbox(f.emulator.url, attacker), 'nothing reached the edited destination').to.deep.equal([])
    expect(await inbox(f.emulator.url, victim)).to.deep.equal([])
    expect(await envelopeOf(messageId), 'the ciphertext is gone').to.equal(undefined)
    expect(delivering.output()).to.match(/"security":true/)
  })

  it('keeps counting a rate-limit budget across a CODE_HASH_KEYS rotation: hits under every listed key count, hits under a dropped key no longer do', async function () {
    this.timeout(90_000)
    const [c, d] = [
      { id: 'c', key: randomBytes(32) },
      { id: 'd', key: randomBytes(32) },
    ]
    const limit = { CLIENT_RATE_LIMIT_PER_MINUTE: '4' }
    const ask = async (url: string) => (await post(url, '/password-recoveries', { identifier: uniqueEmail('nobody') })).status
    // Mid-deploy of step 2: one process still on step 1 (new key second), one on step 2 (new key first).
    const step1 = await web({ ...rings([outbox.b], [c, d]), ...limit })
    const step2 = await web({ ...rings([outbox.b], [d, c]), ...limit })
    expect([await ask(step1), await ask(step1), await ask(step2), await ask(step2)]).to.deep.equal([202, 202, 202, 202])
    expect(await ask(step2), 'hits written under the old key still count').to.equal(429)
    expect(await ask(step1), 'hits written under the new key count on the old ring too').to.equal(429)
    // After the drop only the two hits written under the new key count.
    const dropped = await web({ ...rings([outbox.b], [d]), ...limit })
    expect([await ask(dropped), await ask(dropped), await ask(dropped)]).to.deep.equal([202, 202, 429])
  })
})
