import type { Knex } from 'knex'

/** Who could open an envelope sealed now, as `outbox.envelope_readers()` (migration 20261202001400) sees it. */
export type ReaderCensus = Readonly<{
  /** The distinct `application_name`s of the worker sessions connected to this database. */
  liveWorkers: readonly string[]
  /**
   * Whether this is the upgrade window from 0.1.0: its fleet's stand-in registration exists and the
   * migration that wrote it ran within 30 minutes (20261202001401).
   */
  legacyFleetRegistered: boolean
}>

/** The census, through the SECURITY DEFINER function the api role may call. */
export async function readEnvelopeReaders(db: Knex): Promise<ReaderCensus> {
  const { rows } = await db.raw<{ rows: { live_workers: string[]; legacy_fleet_registered: boolean }[] }>(
    'SELECT live_workers, legacy_fleet_registered FROM outbox.envelope_readers()',
  )
  return { liveWorkers: rows[0]?.live_workers ?? [], legacyFleetRegistered: rows[0]?.legacy_fleet_registered ?? false }
}
