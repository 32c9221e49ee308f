import type { Knex } from 'knex'
import { READABLE_ENVELOPE_VERSIONS, type EnvelopeVersion } from '../crypto/envelope.ts'
import { describeError, type Logger } from '../logging/logger.ts'
import { readEnvelopeReaders, type ReaderCensus } from './envelope-readers-sql.ts'

/** ENVELOPE_VERSION: `auto` negotiates; a version pins it (docs/upgrading.md "Format negotiation"). */
export type EnvelopeVersionSetting = 'auto' | EnvelopeVersion

const ANNOUNCEMENT = ';envelopes='
/** What a worker session that announces nothing opens: release 0.1.0 wrote and read only v1. */
const UNANNOUNCED_READS: readonly string[] = ['v1']
/** How long one census decides for a web process. */
export const NEGOTIATION_TTL_MS = 5_000

/**
 * The `application_name` of a worker connection: its base name plus the envelope versions this
 * release opens (`sealpost-worker-boss;envelopes=v1,v2`), which is how every web knows it is live
 * and what it reads. Within PostgreSQL's 63 bytes.
 */
export function readerApplicationName(base: string): string {
  return `${base}${ANNOUNCEMENT}${READABLE_ENVELOPE_VERSIONS.join(',')}`
}

/** The versions a worker session opens, from its application name. */
export function versionsReadBy(applicationName: string): readonly string[] {
  const at = applicationName.indexOf(ANNOUNCEMENT)
  return at < 0 ? UNANNOUNCED_READS : applicationName.slice(at + ANNOUNCEMENT.length).split(',')
}

/**
 * The version to seal in: the newest this release writes that every connected worker opens. No
 * worker connected: v1 while the previous fleet may still be out there (its stand-in registration
 * is current), else the newest; whichever worker connects next finds its messages waiting. No
 * common version (a fleet that shares none with this web) seals v1, the oldest every release reads.
 */
export function negotiateEnvelopeVersion(census: ReaderCensus, setting: EnvelopeVersionSetting = 'auto'): EnvelopeVersion {
  if (setting !== 'auto') return setting
  const newestFirst = [...READABLE_ENVELOPE_VERSIONS].reverse()
  if (census.liveWorkers.length === 0) return census.legacyFleetRegistered ? 'v1' : newestFirst[0]!
  const readers = census.liveWorkers.map(versionsReadBy)
  return newestFirst.find((version) => readers.every((reads) => reads.includes(version))) ?? 'v1'
}

/**
 * A web process's envelope version, from a census at most NEGOTIATION_TTL_MS old (one query per
 * process every few seconds, shared by concurrent requests). A failed census keeps the last
 * decision, or v1 before any: every release opens v1. A change is logged once.
 */
export function envelopeVersionSource(deps: {
  db: Knex
  setting?: EnvelopeVersionSetting
  logger?: Logger
  clock?: () => number
}): () => Promise<EnvelopeVersion> {
  const setting = deps.setting ?? 'auto'
  const clock = deps.clock ?? Date.now
  let decided: { version: EnvelopeVersion; at: number } | undefined
  let pending: Promise<EnvelopeVersion> | undefined
  const refresh = async (): Promise<EnvelopeVersion> => {
    let version: EnvelopeVersion
    try {
      version = negotiateEnvelopeVersion(await readEnvelopeReaders(deps.db), setting)
    } catch (error) {
      deps.logger?.warn('envelope negotiation: the census failed; keeping the last version', describeError(error))
      version = decided?.version ?? 'v1'
    }
    if (version !== decided?.version)
      deps.logger?.info('envelope negotiation: sealing new messages in this version', { envelopeVersion: version, setting })
    decided = { version, at: clock() }
    return version
  }
  return async () => {
    if (setting !== 'auto') return setting
    if (decided && clock() - decided.at < NEGOTIATION_TTL_MS) return decided.version
    pending ??= refresh().finally(() => {
      pending = undefined
    })
    return pending
  }
}
