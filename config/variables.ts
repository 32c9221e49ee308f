/**
 * What each core environment variable is for, in the words docs/configuration.md shows (generated
 * by `npm run docs:configuration` from this map, each provider's settings slice and the schemas:
 * type, default, which process needs it in production). test/docs.configuration.test.ts fails when
 * the page and these disagree; a variable added to the core schema without a line here does not compile.
 */
import type { z } from 'zod'
import type { coreSchema } from './schema.ts'

export type VariableDoc = {
  /** The processes that read it: web, worker, release, CLI, `npm start`. */
  usedBy: string
  /** The default as a reader should see it, where the schema's own (or its absence) says too little. */
  shownDefault?: string
  meaning: string
}

/** The core environment as written (strings), before parsing: what docs/configuration.md documents. */
type CoreInput = z.input<typeof coreSchema>

export const VARIABLES: Readonly<Record<keyof CoreInput, VariableDoc>> = Object.freeze({
  NODE_ENV: {
    usedBy: 'all',
    shownDefault: '`development`',
    meaning: '`development`, `test`, `staging` or `production`',
  },
  PORT: {
    usedBy: 'web',
    shownDefault: '`3000`',
    meaning: 'HTTP port (`0` picks a free one)',
  },
  LOG_LEVEL: {
    usedBy: 'all',
    shownDefault: '`info`',
    meaning: '`error`, `warn`, `info`, `debug`',
  },
  DATABASE_URL: {
    usedBy: 'release, CLI',
    shownDefault: 'embedded',
    meaning: "the owner's connection; required for `release` in production",
  },
  API_DATABASE_URL: {
    usedBy: 'web',
    shownDefault: '–',
    meaning: 'a login member of `sealpost_api`; required for web',
  },
  WORKER_DATABASE_URL: {
    usedBy: 'worker',
    shownDefault: '–',
    meaning: 'a login member of `sealpost_worker`; required for the worker',
  },
  OUTBOX_ENCRYPTION_KEYS: {
    usedBy: 'web, worker',
    shownDefault: 'generated in dev',
    meaning:
      'key ring `id:base64key,id:base64key…` (each key 32 random bytes; ids of letters, digits, `-`, `_`): the **first** key seals the secrets (AES-256-GCM, HKDF per message, envelope `v2.<id>.…`), **every** listed key opens. See [Rotating keys](operations.md#rotating-keys)',
  },
  OUTBOX_ENCRYPTION_KEY: {
    usedBy: 'web, worker',
    shownDefault: '–',
    meaning: 'a single key, read as the ring `0:<key>`; may stay set beside `OUTBOX_ENCRYPTION_KEYS` only if that ring holds the same key',
  },
  CODE_HASH_KEYS: {
    usedBy: 'web (not the worker)',
    shownDefault: 'generated in dev',
    meaning:
      'key ring as above (each key 32–64 random bytes): the first key hashes new codes (HMAC-SHA-256) and writes rate-limit hits; codes verify and budgets count under every listed key',
  },
  CODE_HASH_KEY: {
    usedBy: 'web',
    shownDefault: '–',
    meaning: 'a single key, read as the ring `0:<key>` (same rule as `OUTBOX_ENCRYPTION_KEY`)',
  },
  ENVELOPE_VERSION: {
    usedBy: 'web',
    shownDefault: '`auto`',
    meaning:
      '`auto`, `v1`, `v2`: the envelope version new secrets are sealed in. `auto` seals the newest version every connected worker opens (a 0.1.0 worker opens only `v1`); `v1` before rolling back to 0.1.0; `v2` only when no 0.1.0 worker can ever run again. See [Format negotiation](upgrading.md#format-negotiation)',
  },
  SEALPOST_API_ROLE: {
    usedBy: 'release, web, worker',
    shownDefault: '–',
    meaning:
      'existing roles (e.g. Heroku `pg:credentials`; lower-case letters, digits, `_`) the release step grants to instead of creating `sealpost_api` / `sealpost_worker`; both or neither. The web and worker check their login is (a member of) them. Required when the owner has no `CREATEROLE` ([Database roles](deploying.md#database-roles-in-production))',
  },
  SEALPOST_WORKER_ROLE: {
    usedBy: 'release, web, worker',
    shownDefault: '–',
    meaning:
      'existing roles (e.g. Heroku `pg:credentials`; lower-case letters, digits, `_`) the release step grants to instead of creating `sealpost_api` / `sealpost_worker`; both or neither. The web and worker check their login is (a member of) them. Required when the owner has no `CREATEROLE` ([Database roles](deploying.md#database-roles-in-production))',
  },
  WORKER_METRICS_PORT: {
    usedBy: 'worker',
    shownDefault: '–',
    meaning: "serve the worker's Prometheus metrics on this port (`GET /metrics`); unset = not served",
  },
  METRICS_TOKEN: {
    usedBy: 'web, worker',
    shownDefault: '–',
    meaning:
      'bearer token for `GET /metrics` (`Authorization: Bearer …`, at least 16 characters); without it metrics are open in development and test and **not served** (404) in staging and production, since their counts would tell a stranger whether an address has an account',
  },
  PHONE_CHANNELS: {
    usedBy: 'web, worker',
    shownDefault: '`whatsapp,sms`',
    meaning:
      'the phone channels a code may go out on, in fallback order: `whatsapp`, `sms`, `whatsapp,sms` or `sms,whatsapp` (each at most once). An allow-list: a channel not listed never carries a code (the web, the courier API, the hooks and the worker follow it alike). A code goes on the first listed channel the fleet has (none: `422 channel_unavailable`); when that channel cannot reach the number, or its providers are held down, the worker carries the same code on over the next listed one. Before any worker has registered, the web takes the channels listed here (none when unset). See [docs/delivery.md](delivery.md#phone-channels)',
  },
  PUBLIC_BASE_URL: {
    usedBy: 'web, worker',
    shownDefault: 'dev: `http://localhost:$PORT`',
    meaning:
      "the web's public `https://` origin as the internet reaches it: SMS are sent with a status callback there (Twilio's webhook route under this origin) and its signature is checked over that URL, never the request's `Host`. Required in staging/production when Twilio is configured",
  },
  INVITATION_LINK_BASE_URL: {
    usedBy: 'worker',
    shownDefault: 'dev: `http://localhost:$PORT`',
    meaning:
      'invitation links are `<base>/join#token=…`; required for the worker in staging/production and `https://` there (the worker refuses to start otherwise, naming it: no invitation ever spends its attempts on a missing setting)',
  },
  CHALLENGE_TTL_SECONDS: {
    usedBy: 'web',
    shownDefault: '`600`',
    meaning: 'challenge lifetime (a resend gives the new code a full lifetime); the worker trusts the stored expiry',
  },
  INVITATION_TTL_SECONDS: {
    usedBy: 'web',
    shownDefault: '`604800`',
    meaning: 'invitation lifetime',
  },
  RETRY_SCHEDULE: {
    usedBy: 'worker',
    shownDefault: '`5s,30s,2m,10m,30m`',
    meaning: 'delay after attempt 1, 2, 3…; a later provider `Retry-After` wins',
  },
  MAX_ATTEMPTS: {
    usedBy: 'worker',
    shownDefault: '`5`',
    meaning: 'the last failing attempt dead-letters `retries_exhausted`',
  },
  MAX_PROVIDER_PAUSE_SECONDS: {
    usedBy: 'worker',
    shownDefault: '`300`',
    meaning: 'the longest one provider answer may pause a channel for the fleet, or delay its message: a longer `Retry-After` is cut to it',
  },
  SEND_TIMEOUT_MS: {
    usedBy: 'worker',
    shownDefault: '`10000`',
    meaning: 'bound on one provider call',
  },
  LEASE_SECONDS: {
    usedBy: 'release',
    shownDefault: '`60`',
    meaning:
      "the delivery queue's pg-boss `expireInSeconds`, written by the release step (a crashed worker's job is retried after it); must be ≥ 2 × `SEND_TIMEOUT_MS` + 5 s. The worker does not read it: it reads the queue's own lease at start and refuses to start when that is below 2 × its `SEND_TIMEOUT_MS` + 5 s, naming both values (\"run the release step\")",
  },
  WORKER_CONCURRENCY: {
    usedBy: 'worker',
    shownDefault: '`16`',
    meaning: 'sends in flight per worker process',
  },
  SEND_CAP_PER_HOUR: {
    usedBy: 'worker',
    shownDefault: '– (no cap)',
    meaning:
      "fleet-wide sends per channel per clock hour, `email:20000,whatsapp:2000,sms:500`: past it the channel's messages wait for the next hour, no attempt spent, with a warning and `sealpost_send_cap_used_ratio` at 80 % (see [Send caps](delivery.md#send-caps)); set it a little under what the provider account allows and what the budget may spend. The `sms` entry is the SMS hourly cap ([SMS pumping](delivery.md#sms-pumping))",
  },
  PHONE_CAP_PER_COUNTRY_PER_HOUR: {
    usedBy: 'worker',
    shownDefault: '– (no cap)',
    meaning:
      "fleet-wide phone sends per country calling code per clock hour, `44:500,1:2000,*:200` (`*`: every code not named, the international ones such as +882 too); past it only that country's messages wait. A code no country has stops the worker at startup",
  },
  SMS_HOURLY_CAP: {
    usedBy: 'none (refused)',
    shownDefault: '–',
    meaning:
      'retired, never in a release: the SMS hourly cap is the `sms` entry of `SEND_CAP_PER_HOUR` (`SEND_CAP_PER_HOUR=sms:500`). Set, every process refuses to start, naming that line',
  },
  SMS_PREFIX_HOURLY_CAP: {
    usedBy: 'worker',
    shownDefault: '– (no cap)',
    meaning:
      'fleet-wide SMS sends per number prefix (the first 7 digits of the E.164 number, calling code included) per clock hour: a burst to a rented block of numbers is held, not sent (see [SMS pumping](delivery.md#sms-pumping))',
  },
  COURIER_CAP_SHARE: {
    usedBy: 'worker',
    shownDefault: '– (counted with the identity flows)',
    meaning:
      "the percent (1–99) of every send cap that courier API and hook messages have to themselves, counted apart: a leaked key or an open sign-up behind a hook spends that share only, and the identity flows keep the rest. Owners' own codes never count against either (see [Caps from the owner's side](security.md#caps-from-the-owners-side))",
  },
  SMS_ALLOWED_COUNTRIES: {
    usedBy: 'web, worker',
    shownDefault: '– (every country)',
    meaning:
      'ISO 3166 alpha-2 countries SMS may carry codes to, `GB,IE,DE`. The worker never sends an SMS elsewhere (the message is dead-lettered `provider_rejected` without a send); where SMS is the only phone channel the fleet delivers on, the web refuses such a number with 422 `unsupported_phone_number`',
  },
  PHONE_ALLOW_FIXED_LINE: {
    usedBy: 'web',
    shownDefault: '`false`',
    meaning:
      '`true` lets codes go to fixed-line numbers; otherwise only valid mobiles (and numbers whose plan does not tell, such as +1) are accepted: 422 `unsupported_phone_number` for the rest. Premium-rate, shared-cost, toll-free, UAN, voicemail, pager and personal numbers are always refused',
  },
  PHONE_ALLOW_VOIP: {
    usedBy: 'web',
    shownDefault: '`false`',
    meaning: '`true` lets codes go to VoIP numbers (see `PHONE_ALLOW_FIXED_LINE`)',
  },
  DATABASE_WAIT_SECONDS: {
    usedBy: 'web, worker',
    shownDefault: '`60`',
    meaning:
      'at startup, how long to wait (retrying with backoff 0.5 s → 5 s, one `waiting for the database` log line per try) for a database that refuses or drops connections, before exiting 1 with a message naming the URL variable; a wrong password or missing database stops at once',
  },
  TRUST_PROXY: {
    usedBy: 'web',
    shownDefault: '`false`',
    meaning:
      'Express `trust proxy`: which hops in front of the web may name the client in `X-Forwarded-For`. `false` = the connecting address is the client; `1` behind one router (Heroku); a hop count; `true` (every hop: only if the router overwrites the header); or a comma-separated list of proxy addresses/CIDR ranges (`10.0.0.0/8,loopback`). Every per-client limit keys on the address this yields',
  },
  TRACE_TRUSTED_CALLERS: {
    usedBy: 'web',
    shownDefault: '– (none)',
    meaning:
      'the clients whose `traceparent` (and `tracestate`, `baggage`) the web continues with tracing on, as client addresses or CIDR ranges (`10.0.0.0/8`), the client being the address `TRUST_PROXY` yields; any other request starts a new trace, so no caller can hide its requests from sampling or carry a trace id of its choosing into the worker (see [Tracing](operations.md#tracing))',
  },
  CLIENT_RATE_LIMIT_PER_MINUTE: {
    usedBy: 'web',
    shownDefault: '`60`',
    meaning: 'requests per minute one client address (an IPv6 client: its /64) may make to the public routes (counted in the database)',
  },
  EXPIRY_PURGE_CRON: {
    usedBy: 'worker',
    shownDefault: '`* * * * *`',
    meaning:
      'when the expiry purge runs (UTC); pg-boss runs a schedule at most once a minute, so a more frequent cron is refused; a warning at startup if it runs less often than `CHALLENGE_TTL_SECONDS`',
  },
  RETENTION_SWEEP_CRON: {
    usedBy: 'worker',
    shownDefault: '`17 3 * * *`',
    meaning: 'when the retention sweep runs (UTC)',
  },
  RETENTION_PUBLISHED_DAYS: {
    usedBy: 'worker',
    shownDefault: '`30`, `90`',
    meaning: 'how long finished messages (with their attempts and dead letters) are kept',
  },
  RETENTION_DEAD_LETTERED_DAYS: {
    usedBy: 'worker',
    shownDefault: '`30`, `90`',
    meaning: 'how long finished messages (with their attempts and dead letters) are kept',
  },
  RETENTION_AUDIT_DAYS: {
    usedBy: 'worker',
    shownDefault: '`400`',
    meaning: 'how long audit records (staff and operator actions, erasures) are kept before the daily retention sweep deletes them',
  },
  RETENTION_EVENTS_DAYS: {
    usedBy: 'worker',
    shownDefault: '`30`',
    meaning: 'how long events and their webhook deliveries are kept before the daily retention sweep deletes them',
  },
  WEBHOOK_ALLOWED_HOSTS: {
    usedBy: 'web, worker',
    shownDefault: 'none',
    meaning:
      'hosts a webhook endpoint may name although they are an IP literal or resolve to a loopback, private or link-local address (an internal receiver, a test); outside production also reachable over http',
  },
  WEBHOOK_RETRY_SCHEDULE: {
    usedBy: 'worker',
    shownDefault: '`5s,1m,5m,30m,2h,8h`',
    meaning:
      "delay after a webhook delivery's failed attempt 1, 2, 3…; a later receiver `Retry-After` wins (capped at `MAX_PROVIDER_PAUSE_SECONDS`)",
  },
  WEBHOOK_MAX_ATTEMPTS: {
    usedBy: 'worker',
    shownDefault: '`7`',
    meaning: 'attempts per webhook delivery; the last failing one dead-letters it (staff redrive)',
  },
  API_DOCS: {
    usedBy: 'web',
    shownDefault: '`on` in development and test, `off` in staging and production',
    meaning: '`on` or `off`: serve the rendered API reference at `GET /docs/` (`GET /openapi.json` is always served)',
  },
  SEALPOST_DATA_DIR: {
    usedBy: '`npm start`',
    shownDefault: '`.data`',
    meaning: 'where the embedded database and development keys live',
  },
  SUPABASE_HOOK_SECRET: {
    usedBy: 'web',
    shownDefault: '–',
    meaning:
      "the secret of Supabase Auth's Send Email and Send SMS hooks, `v1,whsec_<base64>` as the dashboard generates it, at least 24 random bytes (a shorter one stops the web at startup); unset = `POST /hooks/supabase/send-email` and `…/send-sms` answer 404. See [hooks.md](hooks.md)",
  },
  SUPABASE_LINK_ORIGINS: {
    usedBy: 'web',
    shownDefault: '– (links refused)',
    meaning:
      "the https origins a sign-in link through the Supabase hooks may point at, comma-separated (your project's auth URL, `https://<ref>.supabase.co`, or your custom domain): a link elsewhere, an IDN look-alike included, is refused `422 link_origin_not_allowed`, whatever the payload's `site_url` says. See [hooks.md](hooks.md#link-origins)",
  },
  SUPABASE_VERIFY_PATH: {
    usedBy: 'web',
    shownDefault: '`<site_url>/verify`',
    meaning:
      "where Supabase Auth's verify endpoint is: your Auth server's `MAILER_URLPATHS_CONFIRMATION` (`/auth/v1/verify` in Supabase's self-hosted docker setup; a whole URL under `supabase start`), resolved against the hook's `site_url` as Supabase resolves it. Unset, links go to `<site_url>/verify`, right for hosted projects and bare GoTrue. See [hooks.md](hooks.md)",
  },
  SUPABASE_EMAIL_CONTENT: {
    usedBy: 'web',
    meaning:
      "what a Supabase email whose action offers both carries: `both` (the code and the link, as Supabase's own templates can), `link`, or `code` (sent as a `verification_code`). See [hooks.md](hooks.md)",
  },
  SUPABASE_EMAIL_OTP_EXPIRY_SECONDS: {
    usedBy: 'web',
    meaning: "how long a Supabase email code or link is sent for: set it to your project's Email OTP Expiration (10–86 400)",
  },
  SUPABASE_SMS_OTP_EXPIRY_SECONDS: {
    usedBy: 'web',
    meaning:
      "how long a Supabase SMS code is sent for: set it to your project's SMS OTP Expiry (`GOTRUE_SMS_OTP_EXP`, Supabase's default 60 s; `supabase start` uses 6 000); a code is never sent after Supabase stopped accepting it",
  },
  KRATOS_COURIER_API_KEY: {
    usedBy: 'web',
    shownDefault: '–',
    meaning:
      "the key Ory Kratos' HTTP courier presents (`Authorization: Bearer <key>`, or as the basic-auth password; ≥ 32 printable characters); unset = `POST /hooks/kratos/courier` answers 404. See [hooks.md](hooks.md)",
  },
  KRATOS_LINK_ORIGINS: {
    usedBy: 'web',
    shownDefault: '– (links refused)',
    meaning:
      "the https origins a recovery or verification link through the Kratos courier may point at, comma-separated (Kratos' public URL): a link elsewhere is refused `422 link_origin_not_allowed`. See [hooks.md](hooks.md#link-origins)",
  },
  HOOK_DESTINATION_HOURLY_BUDGET: {
    usedBy: 'web',
    shownDefault: '`600`',
    meaning:
      "messages a hook may send to one exact address an hour (ten times as many a day; `alice+1@…` is another address): a backstop far above what Supabase (one message a minute per user and kind) and a sane Kratos send, so a stranger who makes the upstream ask for codes does not spend the owner's. See [hooks.md](hooks.md#budgets)",
  },
  DEFAULT_LOCALE: {
    usedBy: 'web, worker',
    shownDefault: '`en`',
    meaning: "`en`, `de` or `es`: the locale of a message whose request's `Accept-Language` names none of them",
  },
  PRODUCT_NAME: {
    usedBy: 'worker',
    shownDefault: '`Sealpost`',
    meaning: 'the product name in every message',
  },
  SUPPORT_URL: {
    usedBy: 'worker',
    shownDefault: '–',
    meaning: 'shown as plain text at the foot of messages and in security notices; unset = left out',
  },
  OTP_ORIGIN_DOMAIN: {
    usedBy: 'worker',
    shownDefault: '– (no line)',
    meaning:
      'the host named by the last line of SMS codes, `@host #123456` (origin-bound one-time codes: browsers and phones autofill the code only on that site); the host of the page where people enter codes; one segment holds it up to 40 characters (docs/deliverability.md)',
  },
  BREACHED_PASSWORD_API_URL: {
    usedBy: 'web',
    shownDefault: '–',
    meaning:
      'the Pwned Passwords range API new passwords are checked against (`https://api.pwnedpasswords.com`, or a self-hosted copy); unset = no check. `https://` in staging/production (plain `http://` only to a copy on this machine)',
  },
  BREACHED_PASSWORD_TIMEOUT_MS: {
    usedBy: 'web',
    shownDefault: '`2000`',
    meaning: 'bound on one lookup; past it, or on any error, the password is accepted unchecked (fail-open, logged and counted)',
  },
  OTEL_EXPORTER_OTLP_ENDPOINT: {
    usedBy: 'web, worker, `npm start`',
    shownDefault: '– (no tracing)',
    meaning:
      'the OTLP/HTTP collector traces are exported to (`/v1/traces` is appended); set = tracing on (see [Tracing](operations.md#tracing)). OpenTelemetry’s own variable: its `OTEL_EXPORTER_OTLP_HEADERS` (a collector’s API key) and `OTEL_TRACES_SAMPLER` are read by the library',
  },
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: {
    usedBy: 'web, worker, `npm start`',
    shownDefault: '– (no tracing)',
    meaning: 'the full traces URL instead (nothing appended); set = tracing on',
  },
  OTEL_SERVICE_NAME: {
    usedBy: 'web, worker, `npm start`',
    shownDefault: '`sealpost-web`, `sealpost-worker`',
    meaning: 'the `service.name` of every span the process exports',
  },
  OTEL_SDK_DISABLED: {
    usedBy: 'web, worker, `npm start`',
    shownDefault: '`false`',
    meaning: '`true` turns tracing off even with an endpoint set',
  },
})
