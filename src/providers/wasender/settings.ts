import { z } from 'zod'
import { url } from '../../../config/fields.ts'
import type { CoreConfig } from '../../../config/schema.ts'
import type { SettingsOf, SettingsSlice } from '../definition.ts'

/** Wasender's environment variables (docs/configuration.md "Wasender"). */
export const WASENDER_SHAPE = {
  WASENDER_API_URL: url.optional(),
  WASENDER_API_KEY: z.string().min(1).optional(),
  /** The webhook secret of the Wasender session; unset = POST /webhooks/wasender refuses everything. */
  WASENDER_WEBHOOK_SECRET: z.string().min(16, 'must be at least 16 characters').optional(),
}

export type WasenderConfig = CoreConfig & SettingsOf<typeof WASENDER_SHAPE>

const SENDING =
  'Wasender base URL and API key (WhatsApp); both or neither (one alone stops the process, naming both). **Optional**: a worker without any phone provider (Wasender, the WhatsApp Cloud API, Twilio) has no phone channel and still starts and delivers email ([Channels](delivery.md#channels)); `npm start` without one carries phone codes through its local fakes of the WhatsApp Cloud API and Twilio (its phone inbox shows them); the URL `https://` in staging/production (plain `http://` only to a local relay, as for `SES_ENDPOINT`)'

export const wasenderSettings: SettingsSlice<typeof WASENDER_SHAPE, WasenderConfig> = {
  shape: WASENDER_SHAPE,
  docs: {
    WASENDER_API_URL: { usedBy: 'worker', shownDefault: '–', meaning: SENDING },
    WASENDER_API_KEY: { usedBy: 'worker', shownDefault: '–', meaning: SENDING },
    WASENDER_WEBHOOK_SECRET: {
      usedBy: 'web',
      shownDefault: '–',
      meaning: 'the webhook secret of the Wasender session (≥ 16 characters); unset = `POST /webhooks/wasender` refuses everything',
    },
  },
  httpsOnly: ['WASENDER_API_URL'],
  // WhatsApp is optional (no WASENDER_* = no phone channel, docs/delivery.md "Channels"), but half a provider is a typo, never a choice.
  problems: (config) =>
    (config.WASENDER_API_URL === undefined) !== (config.WASENDER_API_KEY === undefined)
      ? (['WASENDER_API_URL', 'WASENDER_API_KEY'] as const).map((variable) => ({
          variable,
          problem: 'set both WASENDER_API_URL and WASENDER_API_KEY for the WhatsApp channel, or neither for no phone channel',
        }))
      : [],
}
