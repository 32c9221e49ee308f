import type { Knex } from 'knex'

/**
 * The phone channels and their providers: `sms` beside `whatsapp`, and the providers `twilio`
 * (Programmable Messaging) and `whatsapp_cloud` (Meta's WhatsApp Cloud API) beside `ses`, `smtp`
 * and `wasender`. Every CHECK that lists channels or providers is widened; nothing is narrowed, so
 * the previous release keeps writing what it wrote (expand only).
 *
 * `security_outbox_attempts.channel`: the channel an attempt went out on, which for a phone
 * message may be a later one of the deployment's phone channels than the message's own (the
 * fallback, docs/delivery.md "Phone channels"). Nullable: rows written before, and by the previous
 * release's worker during a rolling upgrade, have none (their channel is the message's).
 */
const CHANNEL_CHECKS: [table: string, column: string][] = [
  ['security_outbox_messages', 'channel'],
  ['provider_pauses', 'channel'],
  ['suppressed_destinations', 'channel'],
  ['send_windows', 'channel'],
  ['provider_states', 'channel'],
]
const PROVIDER_CHECKS: [table: string, column: string][] = [
  ['provider_states', 'provider'],
  ['security_outbox_attempts', 'provider'],
]

function widen(checks: [string, string][], list: string): string {
  return checks
    .map(
      ([table, column]) => `
    ALTER TABLE outbox.${table} DROP CONSTRAINT ${table}_${column}_check;
    ALTER TABLE outbox.${table} ADD CONSTRAINT ${table}_${column}_check CHECK (${column} IN (${list}));`,
    )
    .join('')
}

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ${widen(CHANNEL_CHECKS, `'email', 'whatsapp', 'sms'`)}
    ${widen(PROVIDER_CHECKS, `'ses', 'smtp', 'wasender', 'twilio', 'whatsapp_cloud'`)}
    ALTER TABLE outbox.delivery_channel_registrations DROP CONSTRAINT delivery_channel_registrations_channels_check;
    ALTER TABLE outbox.delivery_channel_registrations ADD CONSTRAINT delivery_channel_registrations_channels_check
      CHECK (channels <@ ARRAY['email', 'whatsapp', 'sms']);
    ALTER TABLE outbox.security_outbox_attempts ADD COLUMN channel text
      CONSTRAINT security_outbox_attempts_channel_check CHECK (channel IN ('email', 'whatsapp', 'sms'));
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE outbox.security_outbox_attempts DROP COLUMN channel;
    ALTER TABLE outbox.delivery_channel_registrations DROP CONSTRAINT delivery_channel_registrations_channels_check;
    ALTER TABLE outbox.delivery_channel_registrations ADD CONSTRAINT delivery_channel_registrations_channels_check
      CHECK (channels <@ ARRAY['email', 'whatsapp']);
    ${widen(PROVIDER_CHECKS, `'ses', 'smtp', 'wasender'`)}
    ${widen(CHANNEL_CHECKS, `'email', 'whatsapp'`)}
  `)
}
