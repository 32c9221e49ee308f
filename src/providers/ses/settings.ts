import { z } from 'zod'
import { url } from '../../../config/fields.ts'
import type { CoreConfig } from '../../../config/schema.ts'
import type { SettingsOf, SettingsSlice } from '../definition.ts'

/** The sender of development and test mail when SES_FROM_ADDRESS is unset (SMTP falls back to it too). */
export const DEV_FROM_ADDRESS = 'no-reply@sealpost.test'

/** Amazon SES's environment variables (docs/configuration.md "Amazon SES"). */
export const SES_SHAPE = {
  SES_REGION: z.string().min(1).optional(),
  SES_FROM_ADDRESS: z.email().optional(),
  SES_ENDPOINT: url.optional(),
  /** Development only: where the in-process SES emulator listens (0 = any free port). */
  SES_EMULATOR_PORT: z.coerce.number().int().min(0).max(65535).default(8005),
  /** SES configuration set named on every SendEmail (its event destination publishes to the SNS topic). */
  SES_CONFIGURATION_SET: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/, 'letters, digits, _ and - (at most 64)')
    .optional(),
  /** The SNS topic whose deliveries POST /webhooks/ses accepts; unset = the route refuses everything. */
  SES_EVENTS_TOPIC_ARN: z
    .string()
    .regex(/^arn:aws:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}$/, 'an SNS topic ARN')
    .optional(),
  /** Tests and local runs only: a PEM certificate that replaces the fetch of SNS signing certificates. */
  SNS_TEST_SIGNING_CERT: z.string().min(1).optional(),
  /** The sender's display name in the From header (default: PRODUCT_NAME). */
  SES_FROM_NAME: z
    .string()
    .trim()
    .min(1)
    .max(60)
    .regex(/^[^\p{Cc}\p{Cf}]+$/u, 'must not contain control characters')
    .optional(),
}

export type SesSettings = SettingsOf<typeof SES_SHAPE>

export const sesSettings: SettingsSlice<typeof SES_SHAPE, CoreConfig & SesSettings> = {
  shape: SES_SHAPE,
  docs: {
    SES_REGION: {
      usedBy: 'worker',
      shownDefault: '–',
      meaning: 'AWS region; required for the worker in production when `EMAIL_PROVIDERS` lists `ses`',
    },
    SES_FROM_ADDRESS: {
      usedBy: 'worker',
      shownDefault: '`no-reply@sealpost.test` in dev',
      meaning: 'sender address; required in production when `EMAIL_PROVIDERS` lists `ses`',
    },
    SES_ENDPOINT: {
      usedBy: 'worker',
      shownDefault: 'emulator in dev',
      meaning:
        'override the SES endpoint; `https://` in staging/production (plain `http://` only to a relay on this machine: `localhost`, `127.x`, `[::1]`)',
    },
    SES_EMULATOR_PORT: {
      usedBy: '`npm start`',
      shownDefault: '`8005`',
      meaning: 'where the development SES emulator listens (`0` = free port)',
    },
    SES_CONFIGURATION_SET: {
      usedBy: 'worker',
      shownDefault: '–',
      meaning:
        'named on every `SendEmail`; its SNS event destination is what feeds `POST /webhooks/ses` ([Delivery feedback](delivery.md#delivery-feedback))',
    },
    SES_EVENTS_TOPIC_ARN: {
      usedBy: 'web',
      shownDefault: 'dev: a local topic',
      meaning:
        'the SNS topic whose deliveries `POST /webhooks/ses` accepts (`arn:aws:sns:<region>:<account>:<name>`); unset = every delivery refused `unknown_topic`',
    },
    SNS_TEST_SIGNING_CERT: {
      usedBy: 'web',
      shownDefault: 'dev: `.data/sns-test-signing-cert.pem`',
      meaning:
        "tests and local runs only: a PEM certificate used instead of fetching SNS's signing certificate (the URL is still checked); **refused at startup in staging/production**",
    },
    SES_FROM_NAME: {
      usedBy: 'worker',
      shownDefault: '`PRODUCT_NAME`',
      meaning: 'the display name of the `From` header (quoted, or RFC 2047-encoded when not ASCII)',
    },
  },
  httpsOnly: ['SES_ENDPOINT'],
  requiredWhenSelected: { role: 'worker', variables: ['SES_REGION', 'SES_FROM_ADDRESS'], when: 'when `EMAIL_PROVIDERS` lists `ses`' },
  problems: (config, { deployed }) =>
    deployed && config.SNS_TEST_SIGNING_CERT !== undefined
      ? [{ variable: 'SNS_TEST_SIGNING_CERT', problem: `is for tests and local runs only and is refused in ${config.NODE_ENV}` }]
      : [],
}
