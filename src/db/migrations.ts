import type { Knex } from 'knex'
import { withRoleNames, type DatabaseRoles } from './roles.ts'
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
import * as securityNotices from '../../migrations/20261201000100_security_notices.ts'
import * as staffSessionFunctions from '../../migrations/20261201000200_staff_session_functions.ts'
import * as organizationNames from '../../migrations/20261201000210_organization_names.ts'
import * as providerPauseCap from '../../migrations/20261201000220_provider_pause_cap.ts'
import * as envelopeV2 from '../../migrations/20261201000350_envelope_v2.ts'
import * as messageHistory from '../../migrations/20261201000600_message_history.ts'
import * as messageHistoryEvents from '../../migrations/20261201000610_message_history_events.ts'
import * as deliveryEvents from '../../migrations/20261201000500_delivery_events.ts'
import * as deadLetterFunction from '../../migrations/20261201000700_dead_letter_function.ts'
import * as issueChallengeFunction from '../../migrations/20261201000800_issue_challenge_function.ts'
import * as deliveryTriggerChecks from '../../migrations/20261201000900_delivery_trigger_checks.ts'
import * as sessionLastUsed from '../../migrations/20261202000100_session_last_used.ts'
import * as messageIdentityImmutable from '../../migrations/20261202000200_message_identity_immutable.ts'
import * as reissueVerifiedDestination from '../../migrations/20261202000201_reissue_verified_destination.ts'
import * as exactSuppression from '../../migrations/20261202000300_exact_suppression.ts'
import * as ownerBudgets from '../../migrations/20261202000400_owner_budgets.ts'
import * as sendWindows from '../../migrations/20261202000500_send_windows.ts'
import * as deliveryChannelRegistrations from '../../migrations/20261202000600_delivery_channel_registrations.ts'
import * as providerStates from '../../migrations/20261202000700_provider_states.ts'
import * as hiddenIssueTransientErrors from '../../migrations/20261202001000_hidden_issue_transient_errors.ts'
import * as oneStaffCheck from '../../migrations/20261202001200_one_staff_check.ts'
import * as reissueWhileSuppressed from '../../migrations/20261202001300_reissue_while_suppressed.ts'
import * as envelopeReaders from '../../migrations/20261202001400_envelope_readers.ts'
import * as envelopeLegacyWindow from '../../migrations/20261202001401_envelope_legacy_window.ts'
import * as auditRecordReads from '../../migrations/20261202001500_audit_record_reads.ts'
import * as personErasure from '../../migrations/20261202001501_person_erasure.ts'
import * as consoleGaps from '../../migrations/20261202001700_console_gaps.ts'
import * as phoneChannels from '../../migrations/20261202002000_phone_channels.ts'
import * as twilioCallbacks from '../../migrations/20261202002100_twilio_callbacks.ts'
import * as phoneFallback from '../../migrations/20261202002300_phone_fallback.ts'
import * as sendWindowPrefixes from '../../migrations/20261202002400_send_window_prefixes.ts'
import * as courier from '../../migrations/20261202002600_courier.ts'
import * as events from '../../migrations/20261202002700_events.ts'
import * as hookCallers from '../../migrations/20261202002800_hook_callers.ts'
import * as webhookJobs from '../../migrations/20261206002000_webhook_jobs.ts'
import * as hookSecurityNotices from '../../migrations/20261206003000_hook_security_notices.ts'
import * as ownerCaps from '../../migrations/20261206004000_owner_caps.ts'
import * as courierKeyBudgets from '../../migrations/20261206004100_courier_key_budgets.ts'
import * as phoneRouting from '../../migrations/20261206006000_phone_routing.ts'
import * as providerBreaker from '../../migrations/20261206006100_provider_breaker.ts'
import * as budgetTiers from '../../migrations/20261206007000_budget_tiers.ts'
import * as hookCallerRows from '../../migrations/20261206007100_hook_caller_rows.ts'
import * as ownerAsked from '../../migrations/20261206009000_owner_asked.ts'

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
  '20261201000100_security_notices': securityNotices,
  '20261201000200_staff_session_functions': staffSessionFunctions,
  '20261201000210_organization_names': organizationNames,
  '20261201000220_provider_pause_cap': providerPauseCap,
  '20261201000350_envelope_v2': envelopeV2,
  '20261201000600_message_history': messageHistory,
  '20261201000610_message_history_events': messageHistoryEvents,
  '20261201000500_delivery_events': deliveryEvents,
  '20261201000700_dead_letter_function': deadLetterFunction,
  '20261201000800_issue_challenge_function': issueChallengeFunction,
  '20261201000900_delivery_trigger_checks': deliveryTriggerChecks,
  '20261202000100_session_last_used': sessionLastUsed,
  '20261202000200_message_identity_immutable': messageIdentityImmutable,
  '20261202000201_reissue_verified_destination': reissueVerifiedDestination,
  '20261202000300_exact_suppression': exactSuppression,
  '20261202000400_owner_budgets': ownerBudgets,
  '20261202000500_send_windows': sendWindows,
  '20261202000600_delivery_channel_registrations': deliveryChannelRegistrations,
  '20261202000700_provider_states': providerStates,
  '20261202001000_hidden_issue_transient_errors': hiddenIssueTransientErrors,
  '20261202001200_one_staff_check': oneStaffCheck,
  '20261202001300_reissue_while_suppressed': reissueWhileSuppressed,
  '20261202001400_envelope_readers': envelopeReaders,
  '20261202001401_envelope_legacy_window': envelopeLegacyWindow,
  '20261202001500_audit_record_reads': auditRecordReads,
  '20261202001501_person_erasure': personErasure,
  '20261202001700_console_gaps': consoleGaps,
  '20261202002000_phone_channels': phoneChannels,
  '20261202002100_twilio_callbacks': twilioCallbacks,
  '20261202002300_phone_fallback': phoneFallback,
  '20261202002400_send_window_prefixes': sendWindowPrefixes,
  '20261202002600_courier': courier,
  '20261202002700_events': events,
  '20261202002800_hook_callers': hookCallers,
  '20261206002000_webhook_jobs': webhookJobs,
  '20261206003000_hook_security_notices': hookSecurityNotices,
  '20261206004000_owner_caps': ownerCaps,
  '20261206004100_courier_key_budgets': courierKeyBudgets,
  '20261206006000_phone_routing': phoneRouting,
  '20261206006100_provider_breaker': providerBreaker,
  '20261206007000_budget_tiers': budgetTiers,
  '20261206007100_hook_caller_rows': hookCallerRows,
  '20261206009000_owner_asked': ownerAsked,
}

/**
 * knex's migration source over the list above, shared by the release step and knexfile.ts. With
 * named roles (SEALPOST_API_ROLE / SEALPOST_WORKER_ROLE) each migration's SQL grants to them.
 */
export function migrationSourceFor(roles?: DatabaseRoles): Knex.MigrationSource<string> {
  return {
    getMigrations: async () => Object.keys(MIGRATIONS).sort(),
    getMigrationName: (name) => name,
    getMigration: async (name) => {
      const migration = MIGRATIONS[name]
      if (!migration) throw new Error(`unknown migration ${name}`)
      if (!roles?.named) return migration
      return {
        up: (knex: Knex) => migration.up(withRoleNames(knex, roles)),
        down: (knex: Knex) => migration.down(withRoleNames(knex, roles)),
      }
    },
  }
}

export const migrationSource: Knex.MigrationSource<string> = migrationSourceFor()

/** The migrator settings for the given roles (the group roles when omitted). */
export function migrationConfigFor(roles?: DatabaseRoles): Knex.MigratorConfig {
  return { migrationSource: migrationSourceFor(roles), tableName: 'knex_migrations', schemaName: 'public' }
}

export const MIGRATION_CONFIG: Knex.MigratorConfig = migrationConfigFor()
