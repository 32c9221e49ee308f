import { z } from 'zod'
import { isLoopback } from '../../../config/fields.ts'
import type { CoreConfig } from '../../../config/schema.ts'
import type { SettingsOf, SettingsSlice } from '../definition.ts'
import type { SesSettings } from '../ses/settings.ts'

/** `smtp://` or `smtps://` with a host; the value holds a password, so the problem never quotes it. */
const smtpUrl = z.string().refine(
  (text) => {
    try {
      const url = new URL(text)
      return (url.protocol === 'smtp:' || url.protocol === 'smtps:') && url.hostname !== ''
    } catch {
      return false
    }
  },
  {
    message:
      'must be smtp://user:password@host:587 (STARTTLS) or smtps://user:password@host:465 (implicit TLS), reserved characters percent-encoded',
  },
)

/** An SMTP relay's environment variables (docs/configuration.md "SMTP relay"). */
export const SMTP_SHAPE = {
  /** The relay of the `smtp` email provider, credentials in the URL. */
  SMTP_URL: smtpUrl.optional(),
  /** The sender address of mail through SMTP (default: SES_FROM_ADDRESS). */
  SMTP_FROM_ADDRESS: z.email().optional(),
}

/** What the SMTP provider reads: its own settings, and SES's sender as the default of its own. */
export type SmtpConfig = CoreConfig & SettingsOf<typeof SMTP_SHAPE> & Partial<Pick<SesSettings, 'SES_FROM_ADDRESS' | 'SES_FROM_NAME'>>

/**
 * Whether the SMTP connector may send without TLS when the relay offers no STARTTLS: only an
 * `smtp://` relay on this machine, and only in development and test. Everywhere else `smtp://`
 * requires STARTTLS and `smtps://` is TLS from the first byte.
 */
export function smtpPlainAllowed(config: Pick<CoreConfig, 'NODE_ENV'> & { SMTP_URL?: string }): boolean {
  if (config.NODE_ENV !== 'development' && config.NODE_ENV !== 'test') return false
  if (!config.SMTP_URL) return false
  const url = new URL(config.SMTP_URL)
  return url.protocol === 'smtp:' && isLoopback(url)
}

export const smtpSettings: SettingsSlice<typeof SMTP_SHAPE, SmtpConfig> = {
  shape: SMTP_SHAPE,
  docs: {
    SMTP_URL: {
      usedBy: 'worker',
      shownDefault: '–',
      meaning:
        'the relay of the `smtp` provider, `smtp://user:password@host:587` (STARTTLS, **required**: a relay that does not offer it gets nothing) or `smtps://user:password@host:465` (TLS from the first byte); percent-encode reserved characters of the password. Required when `EMAIL_PROVIDERS` lists `smtp` (in every environment). The certificate is verified. Plain SMTP only in development and test to a relay on this machine (`localhost`, `127.x`, `[::1]`), such as Mailpit. Never logged',
    },
    SMTP_FROM_ADDRESS: {
      usedBy: 'worker',
      shownDefault: '`SES_FROM_ADDRESS`',
      meaning:
        'the sender address of mail through SMTP (the display name is `SES_FROM_NAME`); one of the two is required in staging/production when `smtp` is listed',
    },
  },
  problems(config, { role, deployed, selected }) {
    if (!selected || (role !== 'worker' && role !== 'all-in-one')) return []
    if (config.SMTP_URL === undefined) return [{ variable: 'SMTP_URL', problem: 'is required when EMAIL_PROVIDERS lists smtp' }]
    if (deployed && role === 'worker' && config.SMTP_FROM_ADDRESS === undefined && config.SES_FROM_ADDRESS === undefined)
      return [
        {
          variable: 'SMTP_FROM_ADDRESS',
          problem: `is required for the worker in ${config.NODE_ENV} when EMAIL_PROVIDERS lists smtp (or SES_FROM_ADDRESS)`,
        },
      ]
    return []
  },
}
