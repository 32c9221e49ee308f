import { z } from 'zod'
import { url, type Problem } from '../../../config/fields.ts'
import type { CoreConfig } from '../../../config/schema.ts'
import type { SettingsOf, SettingsSlice } from '../definition.ts'

/** Twilio's environment variables (docs/configuration.md "Twilio"). */
export const TWILIO_SHAPE = {
  /** Twilio (SMS, docs/delivery.md "Channels"): all of its settings or none (loadConfig checks the set). */
  TWILIO_ACCOUNT_SID: z
    .string()
    .regex(/^AC[0-9a-fA-F]{32}$/, 'must be an account SID (AC followed by 32 hex digits)')
    .optional(),
  TWILIO_AUTH_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  TWILIO_API_KEY_SID: z
    .string()
    .regex(/^SK[0-9a-fA-F]{32}$/, 'must be an API key SID (SK followed by 32 hex digits)')
    .optional(),
  TWILIO_API_KEY_SECRET: z.string().min(16, 'must be at least 16 characters').optional(),
  TWILIO_MESSAGING_SERVICE_SID: z
    .string()
    .regex(/^MG[0-9a-fA-F]{32}$/, 'must be a Messaging Service SID (MG followed by 32 hex digits)')
    .optional(),
  TWILIO_FROM_NUMBER: z
    .string()
    .regex(
      /^(\+[1-9]\d{7,14}|\d{3,8}|(?=.*[A-Za-z])[A-Za-z0-9 ]{1,11})$/,
      'must be an E.164 number, a short code or an alphanumeric sender ID',
    )
    .optional(),
  TWILIO_API_URL: url.default('https://api.twilio.com'),
}

export type TwilioConfig = CoreConfig & SettingsOf<typeof TWILIO_SHAPE>

const TWILIO_SETTINGS = [
  'TWILIO_ACCOUNT_SID',
  'TWILIO_AUTH_TOKEN',
  'TWILIO_API_KEY_SID',
  'TWILIO_API_KEY_SECRET',
  'TWILIO_MESSAGING_SERVICE_SID',
  'TWILIO_FROM_NUMBER',
] as const

/** Whether Twilio is configured (SMS): any of its settings set (loadConfig refuses half a set). */
export function twilioConfigured(config: Partial<Pick<TwilioConfig, (typeof TWILIO_SETTINGS)[number]>>): boolean {
  return TWILIO_SETTINGS.some((name) => config[name] !== undefined)
}

/**
 * Twilio is optional, but half of it is a typo, never a choice: the account SID and its auth
 * token (which signs every status callback, even when an API key sends), an API key's SID and
 * secret both or neither, exactly one sender, and outside development the public origin its
 * callbacks go to.
 */
function twilioProblems(config: TwilioConfig, deployed: boolean): Problem[] {
  if (!twilioConfigured(config)) return []
  const problems: Problem[] = []
  for (const variable of ['TWILIO_ACCOUNT_SID', 'TWILIO_AUTH_TOKEN'] as const)
    if (config[variable] === undefined)
      problems.push({ variable, problem: 'is required when any TWILIO_* is set (the auth token also signs the status callbacks)' })
  if ((config.TWILIO_API_KEY_SID === undefined) !== (config.TWILIO_API_KEY_SECRET === undefined))
    for (const variable of ['TWILIO_API_KEY_SID', 'TWILIO_API_KEY_SECRET'])
      problems.push({ variable, problem: 'set both TWILIO_API_KEY_SID and TWILIO_API_KEY_SECRET, or neither to send with the auth token' })
  if ((config.TWILIO_MESSAGING_SERVICE_SID === undefined) === (config.TWILIO_FROM_NUMBER === undefined))
    for (const variable of ['TWILIO_MESSAGING_SERVICE_SID', 'TWILIO_FROM_NUMBER'])
      problems.push({ variable, problem: 'set exactly one of TWILIO_MESSAGING_SERVICE_SID and TWILIO_FROM_NUMBER (the SMS sender)' })
  if (deployed && config.PUBLIC_BASE_URL === undefined)
    problems.push({
      variable: 'PUBLIC_BASE_URL',
      problem: `is required in ${config.NODE_ENV} when Twilio is configured (its status callbacks go there)`,
    })
  return problems
}

export const twilioSettings: SettingsSlice<typeof TWILIO_SHAPE, TwilioConfig> = {
  shape: TWILIO_SHAPE,
  docs: {
    TWILIO_ACCOUNT_SID: {
      usedBy: 'web, worker',
      shownDefault: '–',
      meaning:
        'Twilio account SID (`AC…`) for the SMS channel. **Optional**: no `TWILIO_*` = no SMS (`npm start` then runs a local fake Twilio); any of them set requires `TWILIO_ACCOUNT_SID`, `TWILIO_AUTH_TOKEN` and exactly one sender (the process stops naming what is missing)',
    },
    TWILIO_AUTH_TOKEN: {
      usedBy: 'web, worker',
      shownDefault: '–',
      meaning:
        "the account's auth token: the worker sends with it unless an API key is set; the web checks every status callback's `X-Twilio-Signature` with it (Twilio signs with the auth token, never an API key)",
    },
    TWILIO_API_KEY_SID: {
      usedBy: 'worker',
      shownDefault: '–',
      meaning: 'an API key (`SK…`) and its secret to send with instead of the auth token; both or neither',
    },
    TWILIO_API_KEY_SECRET: {
      usedBy: 'worker',
      shownDefault: '–',
      meaning: 'the secret of `TWILIO_API_KEY_SID`; both or neither',
    },
    TWILIO_MESSAGING_SERVICE_SID: {
      usedBy: 'worker',
      shownDefault: '–',
      meaning: 'the Messaging Service (`MG…`) SMS is sent through (Twilio picks the sender); exactly one of it and `TWILIO_FROM_NUMBER`',
    },
    TWILIO_FROM_NUMBER: {
      usedBy: 'worker',
      shownDefault: '–',
      meaning:
        'the sender of SMS (an E.164 number, a short code or an alphanumeric sender ID); exactly one of it and `TWILIO_MESSAGING_SERVICE_SID`',
    },
    TWILIO_API_URL: {
      usedBy: 'worker',
      shownDefault: '`https://api.twilio.com`',
      meaning: "Twilio's REST API origin; `https://` in staging/production (plain `http://` only to a local relay, as for `SES_ENDPOINT`)",
    },
  },
  httpsOnly: ['TWILIO_API_URL'],
  problems: (config, { deployed }) => twilioProblems(config, deployed),
}
