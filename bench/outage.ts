/* eslint-disable no-console -- the benchmark talks to a person at a terminal */
import { execFileSync } from 'node:child_process'
import { mkdir, writeFile } from 'node:fs/promises'
import os from 'node:os'
import { DEFAULT_HEALTH_POLICY } from '../src/outbox/provider-health.ts'
import { percentile } from './measure.ts'
import { runOutage, type OutageRun, type OutageScenario, type OutageTiming, type SignUp } from './outage-scenario.ts'

/** How many calls one half-open interval may carry: the breaker's probes under one lease. */
const PROBES = DEFAULT_HEALTH_POLICY.halfOpenProbes

/**
 * `npm run bench:outage`: an email provider outage staged against real processes in real time,
 * measured from outside (bench/README.md "Outage benchmark"): what reached a provider when, and
 * how often the provider was called while the fleet held it down. OUTAGE_SECONDS and OUTAGE_RATE
 * shorten a smoke run; the figures of record use the defaults (240 s, 2 sign-ups a second).
 */
const timing: OutageTiming = {
  beforeSeconds: 10,
  outageSeconds: Number(process.env.OUTAGE_SECONDS ?? 240),
  afterSeconds: 30,
  rate: Number(process.env.OUTAGE_RATE ?? 2),
  settleSeconds: 150,
}
const SCENARIOS: Record<string, OutageScenario> = {
  secondary: { name: 'SES 503, SMTP secondary', fault: 'unavailable', providers: 'ses,smtp' },
  hold: { name: 'SES 503, no secondary', fault: 'unavailable', providers: 'ses' },
  hang: { name: 'SES hanging, no secondary', fault: 'hang', providers: 'ses' },
}
/** OUTAGE_ONLY=secondary,hold,hang runs a subset (for debugging); the run of record runs all three. */
const only = (process.env.OUTAGE_ONLY ?? 'secondary,hold,hang').split(',')
/** A code counts for the "without a secondary" rows when its challenge outlives the outage by this much. */
const OUTLIVES_MS = 60_000

type Row = { row: string; target: string; measured: string; result: '' | 'PASS' | 'FAIL' }
const rows: Row[] = []
const row = (name: string, measured: string, target?: { text: string; pass: boolean }) =>
  rows.push({ row: name, target: target?.text ?? '', measured, result: target ? (target.pass ? 'PASS' : 'FAIL') : '' })

const seconds = (ms: number) => (Number.isFinite(ms) ? `${(ms / 1000).toFixed(1)} s` : 'never')
const percent = (part: number, whole: number) =>
  whole === 0 ? 'n/a (none)' : `${((100 * part) / whole).toFixed(1)} % (${part} of ${whole})`
const firstArrival = (entry: SignUp) => Math.min(...entry.deliveries.map((delivery) => delivery.at))
const deliveredInTime = (entry: SignUp) => entry.deliveries.length > 0 && firstArrival(entry) < entry.expiresAt

/** What happened while SES was held down: the first hold of the outage to the recovery. */
function holdFigures(run: OutageRun) {
  const down = run.transitions.find((t) => t.to === 'down' && t.provider === 'ses' && t.at >= run.outageStart && t.at < run.recoveredAt)
  if (!down) return undefined
  const heldMs = run.recoveredAt - down.at
  const calls = run.sesCalls.filter((call) => call.at >= down.at && call.at < run.recoveredAt)
  const asked = run.signUps.filter((entry) => entry.requestedAt >= down.at && entry.requestedAt < run.recoveredAt).length
  // The hold's probe intervals as the worker logged them: from the hold to the first failed probe,
  // from each failed probe to the next, the last one to the recovery. Each should hold one call.
  const bounds = [
    down.at,
    ...run.transitions
      .filter((t) => t.to === 'probe_failed' && t.provider === 'ses' && t.at > down.at && t.at < run.recoveredAt)
      .map((t) => t.at),
    run.recoveredAt,
  ]
  const perInterval = bounds.slice(1).map((end, i) => calls.filter((call) => call.at >= bounds[i]! && call.at < end).length)
  const lifted = run.transitions.find((t) => t.to === 'up' && t.provider === 'ses' && t.at >= run.recoveredAt)
  return {
    heldAfterMs: down.at - run.outageStart,
    heldMs,
    calls: calls.length,
    intervals: perInterval.length,
    mostInOneInterval: Math.max(...perInterval),
    firstInterval: perInterval[0]!,
    perMinute: calls.length / (heldMs / 60_000),
    asked,
    liftedAfterMs: lifted ? lifted.at - run.recoveredAt : NaN,
  }
}

function report(run: OutageRun): void {
  const label = run.scenario.name
  const answered = run.signUps.filter((entry) => entry.status === 202)
  row(`${label}: sign-ups answered 202`, percent(answered.length, run.signUps.length), {
    text: '100 %',
    pass: answered.length === run.signUps.length,
  })
  const during = answered.filter((entry) => entry.requestedAt >= run.outageStart && entry.requestedAt < run.recoveredAt)
  const sesDuring = run.sesCalls.filter((call) => call.at >= run.outageStart && call.at < run.recoveredAt).length
  if (run.scenario.providers === 'ses,smtp') {
    const delivered = during.filter(deliveredInTime)
    row(`${label}: codes asked for during the outage delivered`, percent(delivered.length, during.length), {
      text: '100 %',
      pass: delivered.length === during.length && during.length > 0,
    })
    const latencies = during.map((entry) => (entry.deliveries.length ? firstArrival(entry) - entry.requestedAt : Infinity))
    row(`${label}: request → provider p99 (codes asked for during the outage)`, seconds(percentile(latencies, 99)), {
      text: '≤ 10 s',
      pass: percentile(latencies, 99) <= 10_000,
    })
    row(`${label}: request → provider p50 / max`, `${seconds(percentile(latencies, 50))} / ${seconds(Math.max(...latencies))}`)
    const viaSmtp = during.filter((entry) => entry.deliveries.some((delivery) => delivery.provider === 'smtp')).length
    row(`${label}: codes asked for during the outage that went through SMTP`, percent(viaSmtp, during.length))
  } else {
    const eligible = during.filter((entry) => entry.expiresAt - run.recoveredAt >= OUTLIVES_MS)
    const delivered = eligible.filter(deliveredInTime)
    row(
      `${label}: codes whose challenge outlives the outage by ≥ 60 s, delivered before expiry`,
      percent(delivered.length, eligible.length),
      { text: '100 %', pass: delivered.length === eligible.length && eligible.length > 0 },
    )
    const afterRecovery = eligible.map((entry) => (entry.deliveries.length ? firstArrival(entry) - run.recoveredAt : Infinity))
    const worst = Math.max(...afterRecovery)
    row(
      `${label}: arrival − recovery of those codes, max`,
      `${seconds(worst)} (p50 ${seconds(percentile(afterRecovery, 50))})`,
      run.scenario.fault === 'unavailable' ? { text: '≤ 30 s', pass: worst <= 30_000 } : undefined,
    )
  }
  const hold = holdFigures(run)
  if (hold) {
    row(
      `${label}: calls to SES while held down (${seconds(hold.heldMs)}, from ${seconds(hold.heldAfterMs)} into the outage)`,
      `most in one probe interval ${hold.mostInOneInterval} (first interval ${hold.firstInterval}); ${hold.calls} calls in ${hold.intervals} intervals, ${hold.perMinute.toFixed(1)} a minute, while ${hold.asked} messages were asked for`,
      // Half-open sends up to DEFAULT_HEALTH_POLICY.halfOpenProbes probes under one lease (docs/delivery.md).
      { text: `≤ ${PROBES} per probe interval`, pass: hold.mostInOneInterval <= PROBES },
    )
    row(`${label}: hold lifted after recovery`, seconds(hold.liftedAfterMs))
  } else {
    row(`${label}: calls to SES while held down`, 'SES never held down', { text: `held down, ≤ ${PROBES} per probe interval`, pass: false })
  }
  row(
    `${label}: calls to SES during the outage, per code asked for in it`,
    `${sesDuring} (${(sesDuring / Math.max(1, during.length)).toFixed(2)})`,
  )
  row(`${label}: messages still pending when the run stopped waiting`, String(run.leftOpen))
}

function duplicates(runs: OutageRun[]): void {
  const entries = runs.flatMap((run) => run.signUps)
  const twice = entries.filter((entry) => entry.deliveries.length > 1)
  const unexplained = twice.filter((entry) => entry.ambiguous === 0)
  row('all scenarios: codes delivered more than once without an injected ambiguous outcome', `${unexplained.length} of ${entries.length}`, {
    text: '0',
    pass: unexplained.length === 0,
  })
  row('all scenarios: codes delivered more than once after a hung call (ambiguous, allowed)', String(twice.length - unexplained.length))
}

const started = Date.now()
console.log(
  `sealpost outage bench: outage ${timing.outageSeconds} s, ${timing.rate} sign-ups/s, scenarios ${only.join(', ')}; ${os.cpus().length} CPUs, load ${os
    .loadavg()
    .map((n) => n.toFixed(1))
    .join(' ')}`,
)
const runs: OutageRun[] = []
let exitCode = 0
try {
  for (const key of only) {
    const scenario = SCENARIOS[key]
    if (!scenario) throw new Error(`unknown scenario ${key} (secondary, hold, hang)`)
    const log = (line: string) => console.log(`  [${Math.round((Date.now() - started) / 1000)} s · ${scenario.name}] ${line}`)
    log(`starting a fresh stack (load ${os.loadavg()[0]!.toFixed(1)})`)
    const run = await runOutage(scenario, timing, log)
    for (const t of run.transitions) log(`worker: ${t.to} ${t.provider} at ${seconds(t.at - run.outageStart)} into the outage`)
    runs.push(run)
    report(run)
  }
  duplicates(runs)
  const table = [
    '| row | target | measured | result |',
    '|---|---|---|---|',
    ...rows.map((r) => `| ${r.row} | ${r.target} | ${r.measured} | ${r.result} |`),
  ].join('\n')
  const elapsed = Math.round((Date.now() - started) / 1000)
  console.log(`\n${table}\n`)
  console.log(
    `finished in ${elapsed} s; load ${os
      .loadavg()
      .map((n) => n.toFixed(1))
      .join(' ')}`,
  )
  await mkdir('bench/results', { recursive: true })
  const file = `bench/results/outage-${new Date().toISOString().replace(/[:.]/g, '-')}.json`
  await writeFile(
    file,
    JSON.stringify(
      {
        at: new Date().toISOString(),
        commit: commit(),
        seconds: elapsed,
        timing,
        machine: { cpus: os.cpus().length, node: process.version, loadavg: os.loadavg() },
        rows,
        table,
        runs: runs.map((run) => ({
          scenario: run.scenario,
          outageStart: new Date(run.outageStart).toISOString(),
          recoveredAt: new Date(run.recoveredAt).toISOString(),
          transitions: run.transitions.map((t) => ({ ...t, atOutage: (t.at - run.outageStart) / 1000 })),
          sesCalls: run.sesCalls.map((call) => ({ atOutage: (call.at - run.outageStart) / 1000, answer: call.answer })),
          states: run.states,
          leftOpen: run.leftOpen,
          signUps: run.signUps.length,
          // Every code, relative to the outage's start (s): when it was asked for, when it reached a provider.
          codes: run.signUps.map((entry) => ({
            asked: (entry.requestedAt - run.outageStart) / 1000,
            status: entry.status,
            arrivals: entry.deliveries.map((delivery) => ({ at: (delivery.at - run.outageStart) / 1000, provider: delivery.provider })),
            ambiguous: entry.ambiguous,
          })),
        })),
      },
      null,
      2,
    ),
  )
  console.log(`results: ${file}`)
  for (const [i, run] of runs.entries()) {
    const logFile = file.replace(/\.json$/, `-worker-${only[i]}.log`)
    await writeFile(logFile, run.workerLog.join('\n'))
    console.log(`worker log (${run.scenario.name}): ${logFile}`)
  }
  if (rows.some((r) => r.result === 'FAIL')) exitCode = 1
} catch (error) {
  console.error(error)
  for (const run of runs) console.error(`--- worker tail (${run.scenario.name}) ---\n${run.workerTail}`)
  exitCode = 1
}
process.exit(exitCode)

function commit(): string {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim()
  } catch {
    return 'unknown'
  }
}
