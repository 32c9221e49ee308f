import { randomBytes } from 'node:crypto'
import { startSesEmulator } from '../src/providers/ses/emulator.ts'
import { startFakeSmtp, type FakeSmtp } from '../test/support/fake-smtp.ts'
import { makeCertificates } from '../test/support/tls.ts'
import { loopbackClients } from './measure.ts'
import { startOutageSes, type SesMode } from './outage-ses.ts'
import { spawnProcess, startBenchStack, type BenchProcess } from './stack.ts'

/** One outage to stage: how SES fails, and which email providers the worker has. */
export type OutageScenario = { name: string; fault: Exclude<SesMode, 'forward'>; providers: 'ses' | 'ses,smtp' }

export type OutageTiming = {
  /** Sign-ups with SES healthy before the outage (not counted as "asked for during the outage"). */
  beforeSeconds: number
  outageSeconds: number
  /** Sign-ups keep coming this long after recovery; then the run waits for nothing to be pending. */
  afterSeconds: number
  /** Sign-ups per second. */
  rate: number
  /** The longest wait for the outbox to settle once sign-ups stop. */
  settleSeconds: number
}

/** One sign-up as the bench saw it and where its code went, all on the bench's clock (ms). */
export type SignUp = {
  destination: string
  requestedAt: number
  status: number
  expiresAt: number
  /** Arrivals of its code at a provider that took it (SES answered 2xx, or the SMTP server accepted it). */
  deliveries: { at: number; provider: 'ses' | 'smtp' }[]
  /** Calls whose outcome the bench made ambiguous (SES hung after reading the request). */
  ambiguous: number
}

/** A provider transition the worker logged (PROVIDER HELD DOWN, provider probe failed, provider is back). */
export type Transition = { at: number; to: 'down' | 'probe_failed' | 'up'; provider: string }

export type OutageRun = {
  scenario: OutageScenario
  outageStart: number
  recoveredAt: number
  signUps: SignUp[]
  sesCalls: { at: number; answer: string }[]
  transitions: Transition[]
  /** Messages still pending or leased when the run stopped waiting. */
  leftOpen: number
  /** Final message states in the database at the end, by state. */
  states: Record<string, number>
  workerTail: string
  /** Every line the worker wrote, for reading its transitions and retries after the run. */
  workerLog: string[]
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const TRANSITIONS: [RegExp, Transition['to']][] = [
  [/PROVIDER HELD DOWN/, 'down'],
  [/provider probe failed/, 'probe_failed'],
  [/provider is back/, 'up'],
]

/**
 * One scenario on a fresh stack (embedded PostgreSQL, release step, one production web and one
 * production worker): steady sign-ups through `POST /sign-ups` for new addresses, SES failing as
 * the scenario says for `outageSeconds`, then healthy; every arrival recorded at the SES proxy and
 * the SMTP server (a real one, STARTTLS with a CA the worker trusts through NODE_EXTRA_CA_CERTS,
 * since a production worker refuses plain SMTP).
 */
export async function runOutage(scenario: OutageScenario, timing: OutageTiming, log: (line: string) => void): Promise<OutageRun> {
  const stack = await startBenchStack()
  const emulator = await startSesEmulator(0)
  const ses = await startOutageSes(emulator.url)
  const certificates = await makeCertificates('Sealpost outage bench CA')
  let smtp: FakeSmtp | undefined
  let web: BenchProcess | undefined
  let worker: BenchProcess | undefined
  const transitions: Transition[] = []
  const workerLog: string[] = []
  try {
    if (scenario.providers === 'ses,smtp') smtp = await startFakeSmtp({ tls: 'starttls', certificates })
    const shared = {
      SES_ENDPOINT: ses.url,
      EMAIL_PROVIDERS: scenario.providers,
      ...(smtp ? { SMTP_URL: `smtp://127.0.0.1:${smtp.port}` } : {}),
      CHALLENGE_TTL_SECONDS: '600',
      // One client address would be held to 60 a minute; the bench's 2 a second come from eight loopback addresses.
      CLIENT_RATE_LIMIT_PER_MINUTE: '100000',
    }
    web = await spawnProcess('web', stack.environment(shared))
    worker = await spawnProcess('worker', stack.environment({ ...shared, NODE_EXTRA_CA_CERTS: certificates.caCert }))
    watchTransitions(worker, transitions, workerLog)

    const clients = loopbackClients(web.url!, 8)
    const signUps: SignUp[] = []
    const tag = randomBytes(3).toString('hex')
    let sent = 0
    const requests: Promise<void>[] = []
    const signUp = () => {
      const n = sent++
      const entry: SignUp = {
        destination: `outage-${tag}-${n}@example.com`,
        requestedAt: Date.now(),
        status: 0,
        expiresAt: NaN,
        deliveries: [],
        ambiguous: 0,
      }
      signUps.push(entry)
      requests.push(
        (async () => {
          const response = await clients.pool(n).request({
            method: 'POST',
            path: '/sign-ups',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ identifier: entry.destination, password: 'a long enough password' }),
          })
          entry.status = response.statusCode
          const body = (await response.body.json().catch(() => ({}))) as { challengeExpiresAt?: string }
          entry.expiresAt = body.challengeExpiresAt ? Date.parse(body.challengeExpiresAt) : NaN
        })().catch(() => undefined),
      )
    }
    const started = Date.now()
    const totalSeconds = timing.beforeSeconds + timing.outageSeconds + timing.afterSeconds
    const interval = 1000 / timing.rate
    const outageStart = started + timing.beforeSeconds * 1000
    const recoveryAt = outageStart + timing.outageSeconds * 1000
    let outageStarted = 0
    let recoveredAt = 0
    // Open loop on an absolute schedule: a slow answer never delays the next request.
    for (let n = 0; n < totalSeconds * timing.rate; n++) {
      const due = started + n * interval
      if (!outageStarted && due >= outageStart) {
        await sleep(outageStart - Date.now())
        ses.setMode(scenario.fault)
        outageStarted = Date.now()
        log(`outage: SES ${scenario.fault === 'hang' ? 'hangs' : 'answers 503'} for ${timing.outageSeconds} s`)
      }
      if (outageStarted && !recoveredAt && due >= recoveryAt) {
        await sleep(recoveryAt - Date.now())
        ses.setMode('forward')
        recoveredAt = Date.now()
        log('recovered: SES forwards to the emulator again')
      }
      await sleep(due - Date.now())
      signUp()
    }
    if (!recoveredAt) {
      await sleep(recoveryAt - Date.now())
      ses.setMode('forward')
      recoveredAt = Date.now()
    }
    await Promise.all(requests)
    await clients.close()
    log(`${signUps.length} sign-ups sent; waiting for the outbox to settle`)
    const settleBy = Date.now() + timing.settleSeconds * 1000
    let leftOpen = await openMessages(stack.owner)
    while (leftOpen > 0 && Date.now() < settleBy) {
      await sleep(1000)
      leftOpen = await openMessages(stack.owner)
    }
    const counts: { state: string; n: string }[] = await stack
      .owner('outbox.security_outbox_messages')
      .select('state')
      .count('* as n')
      .groupBy('state')
    const states = Object.fromEntries(counts.map((row) => [row.state, Number(row.n)]))

    const byDestination = new Map(signUps.map((entry) => [entry.destination, entry]))
    for (const call of ses.calls) {
      const entry = byDestination.get(call.destination)
      if (!entry) continue
      if (call.answer === 'accepted') entry.deliveries.push({ at: call.at, provider: 'ses' })
      if (call.answer === 'hung') entry.ambiguous += 1
    }
    for (const mail of smtp?.accepted() ?? []) {
      const entry = byDestination.get(mail.to[0] ?? '')
      if (entry) entry.deliveries.push({ at: mail.at, provider: 'smtp' })
    }
    return {
      scenario,
      outageStart: outageStarted,
      recoveredAt,
      signUps,
      sesCalls: ses.calls.map((call) => ({ at: call.at, answer: call.answer })),
      transitions,
      leftOpen,
      states,
      workerTail: worker.tail(),
      workerLog,
    }
  } finally {
    await Promise.allSettled([web?.stop(), worker?.stop()])
    await Promise.allSettled([ses.stop(), emulator.stop(), smtp?.close()])
    await stack.stop()
  }
}

async function openMessages(owner: Awaited<ReturnType<typeof startBenchStack>>['owner']): Promise<number> {
  const row = (await owner('outbox.security_outbox_messages').whereIn('state', ['pending', 'leased']).count('* as n').first()) as {
    n: string
  }
  return Number(row.n)
}

/** Keeps every line the worker writes, and its provider transition lines with the time the worker logged them. */
function watchTransitions(worker: BenchProcess, transitions: Transition[], workerLog: string[]): void {
  let pending = ''
  worker.child.stdout!.on('data', (chunk: Buffer) => {
    pending += chunk.toString('utf8')
    const lines = pending.split('\n')
    pending = lines.pop() ?? ''
    for (const line of lines) {
      workerLog.push(line)
      const kind = TRANSITIONS.find(([pattern]) => pattern.test(line))
      if (!kind) continue
      try {
        const parsed = JSON.parse(line) as { timestamp: string; provider?: string }
        transitions.push({ at: Date.parse(parsed.timestamp), to: kind[1], provider: parsed.provider ?? '' })
      } catch {
        transitions.push({ at: Date.now(), to: kind[1], provider: '' })
      }
    }
  })
}
