import type { Knex } from 'knex'
import * as roles from '../../migrations/20261130000100_roles.ts'
import * as identity from '../../migrations/20261130000200_identity.ts'
import * as outbox from '../../migrations/20261130000300_outbox.ts'
import * as grants from '../../migrations/20261130000400_grants.ts'
import * as providerPauses from '../../migrations/20261130000500_provider_pauses.ts'
import * as identityFlows from '../../migrations/20261130000600_identity_flows.ts'
import * as maintenance from '../../migrations/20261130000700_maintenance.ts'
import * as identityRetention from '../../migrations/20261130000800_identity_retention.ts'
import * as deliveryWritePath from '../../migrations/20261130000900_delivery_write_path.ts'
import * as organizations from '../../migrations/20261130001000_organizations.ts'
import * as attemptCountAtCommit from '../../migrations/20261130001100_attempt_count_at_commit.ts'
import * as operability from '../../migrations/20261130001200_operability.ts'
import * as deliveryEvents from '../../migrations/20261201000500_delivery_events.ts'

type Migration = { up: (knex: Knex) => Promise<void>; down: (knex: Knex) => Promise<void> }

// Listed, not globbed: a migration is code review's business, and type-stripped ESM needs imports.
const MIGRATIONS: Record<string, Migration> = {
  '20261130000100_roles': roles,
  '20261130000200_identity': identity,
  '20261130000300_outbox': outbox,
  '20261130000400_grants': grants,
  '20261130000500_provider_pauses': providerPauses,
  '20261130000600_identity_flows': identityFlows,
  '20261130000700_maintenance': maintenance,
  '20261130000800_identity_retention': identityRetention,
  '20261130000900_delivery_write_path': deliveryWritePath,
  '20261130001000_organizations': organizations,
  '20261130001100_attempt_count_at_commit': attemptCountAtCommit,
  '20261130001200_operability': operability,
  '20261201000500_delivery_events': deliveryEvents,
}

/** knex's migration source over the list above, shared by the release step and knexfile.ts. */
export const migrationSource: Knex.MigrationSource<string> = {
  getMigrations: async () => Object.keys(MIGRATIONS).sort(),
  getMigrationName: (name) => name,
  getMigration: async (name) => {
    const migration = MIGRATIONS[name]
    if (!migration) throw new Error(`unknown migration ${name}`)
    return migration
  },
}

export const MIGRATION_CONFIG: Knex.MigratorConfig = {
  migrationSource,
  tableName: 'knex_migrations',
  schemaName: 'public',
}
