import type { Knex } from 'knex'
import { READABLE_ENVELOPE_VERSIONS, type EnvelopeVersion } from '../crypto/envelope.ts'
import { describeError, type Logger } from '../logging/logger.ts'
import type { Purpose } from './constants.ts'
import { readEnvelopeReaders, type ReaderCensus } from './envelope-readers-sql.ts'
import { fleetPurposesGeneration, purposesAnnouncement, renderedByFleet } from './purpose-negotiation.ts'

/** ENVELOPE_VERSION: `auto` negotiates; a version pins it (docs/upgrading.md "Format negotiation"). */
export type EnvelopeVersionSetting = 'auto' | EnvelopeVersion

const ANNOUNCEMENT = ';envelopes='
/** What a worker session that announces nothing opens: release 0.1.0 wrote and read only v1. */
const UNANNOUNCED_READS: readonly string[] = ['v1']
/** How often a web process takes the census: an old worker's arrival or departure shows within seconds. */
export const NEGOTIATION_REFRESH_MS = 5_000

/**
 * The `application_name` of a worker connection: its base name plus the purposes generation it
 * renders and the envelope versions it opens (`sealpost-worker-boss;purposes=3;envelopes=v1,v2`),
 * which is how every web knows it is live and what it reads. The envelopes last: release 0.2.0's
 * web reads them from `;envelopes=` to the end. Within PostgreSQL's 63 bytes.
 */
export function readerApplicationName(base: string): string {
  return `${base}${purposesAnnouncement()}${ANNOUNCEMENT}${READABLE_ENVELOPE_VERSIONS.join(',')}`
}

/** The versions a worker session opens, from its application name. */
export function versionsReadBy(applicationName: string): readonly string[] {
  const at = applicationName.indexOf(ANNOUNCEMENT)
  return at < 0 ? UNANNOUNCED_READS : applicationName.slice(at + ANNOUNCEMENT.length).split(',')
}

/**
 * The oldest version a negotiation may settle on outside the upgrade window: the first that binds
 * channel and destination. Announcements are application names the worker login writes itself, so
 * they may choose among versions at or above it, never below.
 */
const FLOOR: EnvelopeVersion = 'v2'
const rank = (version: string) => READABLE_ENVELOPE_VERSIONS.indexOf(version as EnvelopeVersion)

/**
 * The version to seal in: the newest this release writes that every connected worker opens.
 * During the upgrade window (`legacyFleetRegistered`: migration 20261202001401) a worker session
 * that announces nothing is the previous release's and opens only v1, and with no worker connected
 * the previous fleet may still come back, so v1. Outside it, unannounced sessions are not readers
 * and nothing seals below FLOOR: a stolen worker login cannot buy an envelope that opens under an
 * edited destination. No worker connected: the newest.
 */
export function negotiateEnvelopeVersion(census: ReaderCensus, setting: EnvelopeVersionSetting = 'auto'): EnvelopeVersion {
  if (setting !== 'auto') return setting
  const newestFirst = [...READABLE_ENVELOPE_VERSIONS].reverse()
  const legacy = census.legacyFleetRegistered
  const readers = census.liveWorkers.filter((name) => legacy || name.includes(ANNOUNCEMENT)).map(versionsReadBy)
  if (readers.length === 0) return legacy ? 'v1' : newestFirst[0]!
  const common = newestFirst.find((version) => readers.every((reads) => reads.includes(version)))
  if (legacy) return common ?? 'v1'
  return common !== undefined && rank(common) >= rank(FLOOR) ? common : FLOOR
}

/** A web process's formats, decided in the background (never on a request's path). */
export type EnvelopeNegotiation = {
  /** The version to seal in now: the last census's decision. */
  version: () => EnvelopeVersion
  /** Whether every live worker renders this purpose (src/outbox/purpose-negotiation.ts), by the last census. */
  renders: (purpose: Purpose) => boolean
  /** Takes a census now; on failure keeps the last decision and logs by error name. */
  refresh(): Promise<void>
  stop(): void
}

type Decision = { version: EnvelopeVersion; generation: number }

/** Logs what changed between two decisions (each once, when it changes). */
function logChange(logger: Logger | undefined, before: Decision | undefined, next: Decision): void {
  if (next.version !== before?.version)
    logger?.info('envelope negotiation: sealing new messages in this version', { envelopeVersion: next.version })
  if (next.generation !== before?.generation)
    logger?.info('purpose negotiation: accepting the purposes every live worker renders', {
      purposesGeneration: Number.isFinite(next.generation) ? next.generation : 'any',
    })
}

/**
 * Takes the first census (a failure here stops the web's startup: it must not guess), then one
 * every NEGOTIATION_REFRESH_MS in the background, like the channel directory: a request never
 * waits for it, nor takes a second pooled connection inside its transaction for it. A census
 * that fails keeps the last decision. A pinned ENVELOPE_VERSION pins the version only: the
 * purposes every live worker renders are still read from the census. A change is logged once.
 */
export async function loadEnvelopeNegotiation(deps: {
  db: Knex
  setting?: EnvelopeVersionSetting
  logger?: Logger
  refreshMs?: number
}): Promise<EnvelopeNegotiation> {
  const decide = (census: ReaderCensus): Decision => ({
    version: negotiateEnvelopeVersion(census, deps.setting ?? 'auto'),
    generation: fleetPurposesGeneration(census),
  })
  let current = decide(await readEnvelopeReaders(deps.db))
  logChange(deps.logger, undefined, current)
  let running: Promise<void> | undefined
  const read = async () => {
    try {
      const next = decide(await readEnvelopeReaders(deps.db))
      logChange(deps.logger, current, next)
      current = next
    } catch (error) {
      deps.logger?.warn('envelope negotiation: census failed; keeping the last decision', describeError(error))
    } finally {
      running = undefined
    }
  }
  // One census at a time: a slow database is not asked again before it answered.
  const refresh = (): Promise<void> => (running ??= read())
  const timer = setInterval(() => void refresh(), deps.refreshMs ?? NEGOTIATION_REFRESH_MS)
  timer.unref()
  return {
    version: () => current.version,
    renders: (purpose) => renderedByFleet(purpose, current.generation),
    refresh,
    stop: () => clearInterval(timer),
  }
}
