import { readFileSync } from 'node:fs'
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes, randomUUID } from 'node:crypto'
import { chmod, mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import knex, { type Knex } from 'knex'
import { fromKnex, type PgBoss } from 'pg-boss'
import { uuidv7 } from 'uuidv7'
import { envelopeContext, seal } from '../src/crypto/envelope.ts'
import { singleKeyRing } from '../src/crypto/key-ring.ts'
import { QUEUES, type Channel } from '../src/outbox/constants.ts'
import { createBoss } from '../src/db/boss.ts'
import { startEmbeddedPostgres } from '../src/db/embedded.ts'
import { createKnex } from '../src/db/knex.ts'
import { ensureLoginUsers } from '../src/db/login-users.ts'
import { release } from '../src/db/release.ts'
import { createLogger, type Logger } from '../src/logging/logger.ts'
import { registerDeliveryChannels } from '../src/outbox/channel-registrations-sql.ts'
import { enqueueSecurityMessageTx } from '../src/outbox/enqueue.ts'
import { keysFromRings, type Keys } from '../src/runtime/dev-keys.ts'
import { startSesEmulator } from '../src/providers/ses/emulator.ts'
import { startFakeTwilio } from '../src/providers/twilio/fake.ts'
import { startFakeWasender } from '../src/providers/wasender/fake.ts'

export const WASENDER_KEY = 'bench-wasender-key'
const TWILIO_ACCOUNT_SID = `AC${'b'.repeat(32)}`
const TWILIO_AUTH_TOKEN = 'bench-twilio-auth-token'

/**
 * Everything the benchmark runs against, started from nothing: an embedded PostgreSQL with
 * production durability (fsync on), the release step, login roles, the SES emulator and the
 * fake Wasender (in this process, so its arrival times share the bench's clock).
 */
export async function startBenchStack() {
  const logger: Logger = createLogger({ level: 'error' })
  const dataDir = await mkdtemp(path.join(tmpdir(), 'sealpost-bench-'))
  // As root the embedded server runs as `postgres`, which must reach the folder.
  await chmod(dataDir, 0o755)
  const embedded = await startEmbeddedPostgres({ dataDir, database: 'sealpost_bench', logger })
  const config = { LEASE_SECONDS: 60 }
  await release(embedded.ownerUrl, config, logger)
  const { apiUrl, workerUrl } = await ensureLoginUsers(embedded.ownerUrl)
  const owner = knex({ client: 'pg', connection: embedded.ownerUrl, pool: { min: 0, max: 20 } })
  const api = createKnex(apiUrl, { applicationName: 'bench-enqueue', max: 20, logger })
  const webBoss: PgBoss = createBoss(apiUrl, 'web', logger)
  // The raw ceilings run as the owner, on queues of their own.
  const ownerBoss: PgBoss = createBoss(embedded.ownerUrl, 'web', logger)
  await Promise.all([webBoss.start(), ownerBoss.start()])
  const ses = await startSesEmulator(0)
  const wasender = await startFakeWasender(WASENDER_KEY)
  const twilio = await startFakeTwilio({ accountSid: TWILIO_ACCOUNT_SID, authToken: TWILIO_AUTH_TOKEN })
  // The channels a bench worker offers, registered up front: rows run a web before (or without) a worker.
  await registerDeliveryChannels(
    owner,
    { workerId: randomUUID(), channels: ['email', 'whatsapp', 'sms'], providers: ['ses', 'wasender', 'twilio'] },
    new Date(),
  )
  const keys: Keys = keysFromRings(singleKeyRing(randomBytes(32)), singleKeyRing(randomBytes(32)))

  const environment = (extra: Record<string, string>): NodeJS.ProcessEnv => ({
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    NODE_ENV: 'production',
    PORT: '0',
    API_DATABASE_URL: apiUrl,
    WORKER_DATABASE_URL: workerUrl,
    OUTBOX_ENCRYPTION_KEY: keys.outboxKey[0].key.toString('base64'),
    CODE_HASH_KEY: keys.codeHashKey.toString('base64'),
    SES_REGION: 'us-east-1',
    SES_FROM_ADDRESS: 'no-reply@sealpost.test',
    SES_ENDPOINT: ses.url,
    AWS_ACCESS_KEY_ID: 'local',
    AWS_SECRET_ACCESS_KEY: 'local',
    WASENDER_API_URL: wasender.url,
    WASENDER_API_KEY: WASENDER_KEY,
    TWILIO_ACCOUNT_SID,
    TWILIO_AUTH_TOKEN,
    TWILIO_FROM_NUMBER: '+15005550006',
    TWILIO_API_URL: twilio.url,
    PUBLIC_BASE_URL: 'https://app.sealpost.test',
    // A production worker needs it (and will refuse to start without it); the bench sends codes only.
    INVITATION_LINK_BASE_URL: 'https://app.sealpost.test',
    // BENCH_PROFILE_DIR=<dir>: every web and worker process writes a V8 CPU profile there on exit.
    // BENCH_NODE_OPTIONS: further Node options for those processes (a memory trace preload, heap flags).
    ...nodeOptions(),
    ...extra,
  })

  /** The phone provider the SMS row sends through: the local fake Twilio, on channel sms. */
  const sms: PhoneFake = { channel: 'sms', label: 'the fake Twilio', fake: twilio }

  let runNumber = 0
  return {
    owner,
    api,
    webBoss,
    ownerBoss,
    keys,
    wasender,
    sms,
    ownerUrl: embedded.ownerUrl,
    workerUrl,
    environment,
    /** CPU seconds PostgreSQL has used so far: the postmaster, its reaped children and its live ones. */
    async postgresCpuSeconds(): Promise<number> {
      const postmaster = Number((await readFile(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8')).split('\n')[0])
      let ticks = 0
      for (const entry of await readdir('/proc')) {
        if (!/^\d+$/.test(entry)) continue
        const fields = await procStat(Number(entry))
        if (!fields) continue
        if (Number(entry) === postmaster) ticks += fields.utime + fields.stime + fields.cutime + fields.cstime
        else if (fields.ppid === postmaster) ticks += fields.utime + fields.stime
      }
      return ticks / CLOCK_TICKS
    },
    /** Destinations for which an ambiguous outcome (the provider sent, the worker could not know) was injected. */
    ambiguous: new Set<string>(),
    /** `count` active identities with a verified phone and an open recovery challenge each. */
    /**
     * VACUUM ANALYZE of the whole database: what earlier rows (and this row's seeding) wrote is
     * settled before an enqueue row counts, so autovacuum does not pick that moment to run and
     * the raw ceiling and the rows read against it start alike.
     */
    async settle(): Promise<void> {
      await owner.raw('VACUUM ANALYZE')
    },
    seedChallenges: (count: number) => seedChallenges(owner, nextPrefix(), count),
    /** `count` active identities with a verified email each, for the HTTP enqueue benchmark. */
    async seedEmailIdentities(count: number): Promise<string[]> {
      const run = nextPrefix()
      await owner.raw(
        `WITH s AS (SELECT g, gen_random_uuid() AS identity_id FROM generate_series(1, ?) g),
              i AS (INSERT INTO identity.identities (id, status) SELECT identity_id, 'active' FROM s)
         INSERT INTO identity.login_identifiers (id, identity_id, kind, value, verified_at)
           SELECT gen_random_uuid(), identity_id, 'email', 'bench-' || ? || '-' || g || '@example.com', now() FROM s`,
        [count, run],
      )
      return Array.from({ length: count }, (_, i) => `bench-${run}-${i + 1}@example.com`)
    },
    /**
     * A backlog for the delivery benchmark: the rows the enqueue writes (message, envelope sealed
     * exactly as `enqueueSecurityMessageTx` seals it, pg-boss job), a thousand per transaction in
     * multi-row statements. The per-request enqueue is measured on its own (HTTP and direct rows).
     */
    async enqueue(challenges: { challengeId: string; destination: string }[], channel: Channel = 'whatsapp'): Promise<string[]> {
      const ids: string[] = []
      for (let start = 0; start < challenges.length; start += 1000) {
        const rows = challenges.slice(start, start + 1000).map((challenge) => ({ ...challenge, id: uuidv7(), jobId: randomUUID() }))
        const expiresAt = new Date(Date.now() + 3_600_000)
        await api.transaction(async (trx) => {
          await trx('outbox.security_outbox_messages').insert(
            rows.map((row) => ({
              id: row.id,
              job_id: row.jobId,
              purpose: 'password_recovery',
              challenge_id: row.challengeId,
              channel,
              destination: row.destination,
              locale: 'en',
              expires_at: expiresAt,
            })),
          )
          await trx('outbox.security_outbox_ciphertexts').insert(
            rows.map((row) => ({
              message_id: row.id,
              envelope: seal(
                keys.outboxKey,
                Buffer.from(String(100_000 + (row.id.charCodeAt(35) % 9) * 11_111)),
                envelopeContext(row.id, 'password_recovery', channel, row.destination),
              ),
            })),
          )
          await webBoss.insert(
            QUEUES.delivery,
            rows.map((row) => ({ id: row.jobId, data: { messageId: row.id } })),
            { db: fromKnex(trx) },
          )
        })
        ids.push(...rows.map((row) => row.id))
      }
      return ids
    },
    enqueueOne,
    async stop() {
      await Promise.allSettled([webBoss.stop({ graceful: false }), ownerBoss.stop({ graceful: false })])
      await Promise.allSettled([api.destroy(), owner.destroy(), wasender.stop(), twilio.stop(), ses.stop()])
      await embedded.stop()
      await rm(dataDir, { recursive: true, force: true })
    },
  }

  function nextPrefix(): number {
    runNumber += 1
    return runNumber
  }

  async function enqueueOne(trx: Knex.Transaction, challenge: { challengeId: string; destination: string }) {
    return await enqueueSecurityMessageTx(
      trx,
      { boss: webBoss, outboxKey: keys.outboxKey, codeHashKey: keys.codeHashKey },
      {
        purpose: 'password_recovery',
        challengeId: challenge.challengeId,
        channel: 'whatsapp',
        destination: challenge.destination,
        locale: 'en',
        expiresAt: new Date(Date.now() + 3_600_000),
      },
      Buffer.from(String(100_000 + Math.floor(Math.random() * 900_000))),
    )
  }
}

/** Bulk rows by SQL: the benchmark measures delivery, not the sign-up flow that would create them. */
async function seedChallenges(owner: Knex, run: number, count: number): Promise<{ challengeId: string; destination: string }[]> {
  const prefix = `+1999${String(run).padStart(3, '0')}`
  await owner.transaction(async (trx) => {
    await trx.raw(
      `CREATE TEMP TABLE seed ON COMMIT DROP AS
      SELECT gen_random_uuid() AS identity_id, gen_random_uuid() AS login_id, ? || lpad(g::text, 7, '0') AS destination FROM generate_series(1, ?) g`,
      [prefix, count],
    )
    await trx.raw(`INSERT INTO identity.identities (id, status) SELECT identity_id, 'active' FROM seed`)
    await trx.raw(
      `INSERT INTO identity.login_identifiers (id, identity_id, kind, value, verified_at) SELECT login_id, identity_id, 'phone', destination, now() FROM seed`,
    )
    await trx.raw(`INSERT INTO identity.challenges (id, purpose, identity_id, login_identifier_id, code_hash, expires_at)
      SELECT gen_random_uuid(), 'password_recovery', identity_id, login_id, sha256(destination::bytea), now() + interval '1 hour' FROM seed`)
  })
  const rows: { challenge_id: string; destination: string }[] = await owner('identity.challenges as c')
    .join('identity.login_identifiers as l', 'l.id', 'c.login_identifier_id')
    .where('l.value', 'like', `${prefix}%`)
    .select('c.id as challenge_id', 'l.value as destination')
  return rows.map((row) => ({ challengeId: row.challenge_id, destination: row.destination }))
}

export type BenchStack = Awaited<ReturnType<typeof startBenchStack>>

/** A local phone provider the bench drives: what it was sent, and how it answers. */
export type PhoneFake = {
  channel: Channel
  label: string
  fake: {
    requests: { to: string; text: string; at: number; accepted: boolean; finishedAt?: number }[]
    behave(next: () => { kind: 'accept'; delayMs?: number }): void
  }
}

/** Linux's USER_HZ: /proc times are in these ticks. */
const CLOCK_TICKS = 100

/** Fields of /proc/<pid>/stat (after the command name, which may hold spaces), or undefined once the process is gone. */
async function procStat(pid: number): Promise<{ ppid: number; utime: number; stime: number; cutime: number; cstime: number } | undefined> {
  let text: string
  try {
    text = await readFile(`/proc/${pid}/stat`, 'utf8')
  } catch {
    return undefined
  }
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ')
  // After the name: state(0) ppid(1) … utime(11) stime(12) cutime(13) cstime(14).
  return {
    ppid: Number(fields[1]),
    utime: Number(fields[11]),
    stime: Number(fields[12]),
    cutime: Number(fields[13]),
    cstime: Number(fields[14]),
  }
}

/** A web or worker process as the Procfile runs it; its log lines are drained, the tail kept for errors. */
export type BenchProcess = {
  child: ChildProcess
  peakRssMb: () => Promise<number>
  cpuSeconds: () => Promise<number>
  stop: () => Promise<void>
  /** The last 8 000 characters the process wrote (its `delivery pipeline stopped` counters, after stop). */
  tail: () => string
  /** How many times the worker logged a provider held down (`PROVIDER HELD DOWN`), over its whole output. */
  holds: () => number
  url?: string
}

function nodeOptions(): { NODE_OPTIONS?: string } {
  const options = [
    ...(process.env.BENCH_PROFILE_DIR ? [`--cpu-prof --cpu-prof-dir=${path.resolve(process.env.BENCH_PROFILE_DIR)}`] : []),
    ...(process.env.BENCH_NODE_OPTIONS ? [process.env.BENCH_NODE_OPTIONS] : []),
  ]
  return options.length > 0 ? { NODE_OPTIONS: options.join(' ') } : {}
}

/** The Node flags the Procfile starts a process type with (the worker's young-generation size), so the bench runs what production runs. */
function procfileNodeFlags(kind: 'web' | 'worker'): string[] {
  const line = new RegExp(`^${kind}: exec node (.*)src/bin/${kind}\\.ts$`, 'm').exec(readFileSync('Procfile', 'utf8'))
  if (!line) throw new Error(`the Procfile has no "${kind}: exec node … src/bin/${kind}.ts" line`)
  return line[1]!.trim().split(/\s+/).filter(Boolean)
}

export async function spawnProcess(kind: 'web' | 'worker', env: NodeJS.ProcessEnv): Promise<BenchProcess> {
  const child = spawn(process.execPath, [...procfileNodeFlags(kind), `src/bin/${kind}.ts`], { env, stdio: ['ignore', 'pipe', 'pipe'] })
  let tail = ''
  let ready: (url: string) => void = () => {}
  let failed: (error: Error) => void = () => {}
  const started = new Promise<string>((resolve, reject) => ((ready = resolve), (failed = reject)))
  const marker = kind === 'web' ? /"message":"web listening".*?"url":"([^"]+)"/ : /"message":"worker started"/
  let seen = false
  let holds = 0
  // The marker may straddle two chunks: the end of the previous one is scanned again with the next.
  let carry = ''
  const onData = (chunk: Buffer) => {
    const text = chunk.toString('utf8')
    tail = (tail + text).slice(-8_000)
    const scanned = carry + text
    holds += scanned.split(HELD_DOWN).length - 1
    carry = scanned.slice(-(HELD_DOWN.length - 1))
    if (!seen) {
      const match = marker.exec(tail)
      if (match) {
        seen = true
        ready(match[1] ?? '')
      }
    }
  }
  child.stdout.on('data', onData)
  child.stderr.on('data', onData)
  const exited = new Promise<void>((resolve) => child.on('close', () => resolve()))
  child.on('close', (code) => failed(new Error(`${kind} exited (${code}) before it started:\n${tail}`)))
  const url = await Promise.race([
    started,
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${kind} did not start in 30 s:\n${tail}`)), 30_000).unref()),
  ])
  return {
    child,
    url: url || undefined,
    /** CPU seconds the process has used so far (user + system). */
    async cpuSeconds() {
      const fields = await procStat(child.pid!)
      return fields ? (fields.utime + fields.stime) / CLOCK_TICKS : NaN
    },
    /** VmHWM: the process's peak resident set, read from the kernel. */
    async peakRssMb() {
      const status = await readFile(`/proc/${child.pid}/status`, 'utf8')
      const kb = Number(/VmHWM:\s+(\d+)\s+kB/.exec(status)?.[1] ?? NaN)
      return kb / 1024
    },
    async stop() {
      child.kill('SIGTERM')
      await exited
    },
    tail: () => tail,
    holds: () => holds,
  }
}

/** The worker's log line when the fleet holds a provider down (jobs/deliver.ts). */
const HELD_DOWN = 'PROVIDER HELD DOWN'
