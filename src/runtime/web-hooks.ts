import type { CoreConfig as Config } from '../../config/schema.ts'
import type { HookRouteDeps } from '../http/routes/hooks.ts'
import type { Logger } from '../logging/logger.ts'

type HookConfig = Partial<
  Pick<Config, 'KRATOS_COURIER_API_KEY' | 'SUPABASE_LINK_ORIGINS' | 'KRATOS_LINK_ORIGINS' | 'HOOK_DESTINATION_HOURLY_BUDGET'>
> &
  Partial<
    Pick<
      Config,
      'SUPABASE_VERIFY_PATH' | 'SUPABASE_EMAIL_CONTENT' | 'SUPABASE_EMAIL_OTP_EXPIRY_SECONDS' | 'SUPABASE_SMS_OTP_EXPIRY_SECONDS'
    >
  >

/**
 * The hook routes' settings from configuration (docs/hooks.md): each configured hook's credential,
 * what a Supabase email carries and where its link goes, the project's OTP lifetimes, the origins
 * its links may point at and its per-address budget. A hook configured without link
 * origins delivers codes but refuses every link; that is said once, loudly, at startup.
 */
export function hookSettings(
  config: HookConfig,
  supabaseSigningKey: Buffer | null,
  logger: Pick<Logger, 'warn'>,
): Pick<HookRouteDeps, 'supabase' | 'kratos' | 'hookSettings'> {
  const perHour = config.HOOK_DESTINATION_HOURLY_BUDGET
  const budget = perHour === undefined ? {} : { perDestinationPerHour: perHour }
  const missing = [
    ...(supabaseSigningKey && (config.SUPABASE_LINK_ORIGINS ?? []).length === 0 ? ['SUPABASE_LINK_ORIGINS'] : []),
    ...(config.KRATOS_COURIER_API_KEY && (config.KRATOS_LINK_ORIGINS ?? []).length === 0 ? ['KRATOS_LINK_ORIGINS'] : []),
  ]
  for (const variable of missing)
    logger.warn(
      'MISCONFIGURATION: this hook delivers codes, but every link through it is refused (422 link_origin_not_allowed) until the variable names its origins',
      {
        variable,
      },
    )
  return {
    supabase: supabaseSigningKey
      ? {
          signingKey: supabaseSigningKey,
          content: config.SUPABASE_EMAIL_CONTENT ?? 'both',
          emailOtpExpirySeconds: config.SUPABASE_EMAIL_OTP_EXPIRY_SECONDS ?? 3_600,
          smsOtpExpirySeconds: config.SUPABASE_SMS_OTP_EXPIRY_SECONDS ?? 60,
          ...(config.SUPABASE_VERIFY_PATH ? { verifyPath: config.SUPABASE_VERIFY_PATH } : {}),
        }
      : undefined,
    kratos: config.KRATOS_COURIER_API_KEY ? { apiKey: config.KRATOS_COURIER_API_KEY } : undefined,
    hookSettings: {
      supabase: { linkOrigins: config.SUPABASE_LINK_ORIGINS ?? [], ...budget },
      kratos: { linkOrigins: config.KRATOS_LINK_ORIGINS ?? [], ...budget },
    },
  }
}
