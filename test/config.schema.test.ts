import { randomBytes } from 'node:crypto'
import { expect } from 'chai'
import { ConfigError, parseSchedule } from '../config/schema.ts'
import { parseEmailProviders, whatsAppProvider } from '../src/providers/channels.ts'
import { loadConfig } from '../src/providers/config.ts'
import { smtpPlainAllowed } from '../src/providers/smtp/settings.ts'
import { parseTemplateLanguages } from '../src/providers/whatsapp-cloud/settings.ts'
import { cronIntervalSeconds } from '../src/runtime/worker-settings.ts'

describe('configuration', () => {
  const key = randomBytes(32).toString('base64')
  const production = {
    NODE_ENV: 'production',
    API_DATABASE_URL: 'postgres://api:secret-pass@db.internal:5432/sealpost',
    WORKER_DATABASE_URL: 'postgres://worker:secret-pass@db.internal:5432/sealpost',
    OUTBOX_ENCRYPTION_KEY: key,
    CODE_HASH_KEY: key,
    SES_REGION: 'eu-west-1',
    SES_FROM_ADDRESS: 'no-reply@example.com',
    WASENDER_API_URL: 'https://wasender.example.com',
    WASENDER_API_KEY: 'wasender-key',
    INVITATION_LINK_BASE_URL: 'https://app.example.com',
  }
  const refusal = (env: Record<string, string>, role: Parameters<typeof loadConfig>[1]) => {
    try {
      loadConfig(env, role)
    } catch (error) {
      expect(error).to.be.instanceOf(ConfigError)
      return error as ConfigError
    }
    throw new Error('expected a ConfigError')
  }

  it('refuses SNS_TEST_SIGNING_CERT in staging and production, naming it and not its value', () => {
    for (const NODE_ENV of ['staging', 'production']) {
      const error = refusal({ ...production, NODE_ENV, SNS_TEST_SIGNING_CERT: '/tmp/secret-path.pem' }, 'web')
      expect(error.variables).to.deep.equal(['SNS_TEST_SIGNING_CERT'])
      expect(error.message).to.not.include('secret-path')
    }
    expect(loadConfig({ NODE_ENV: 'test', SNS_TEST_SIGNING_CERT: '/tmp/x.pem' }, 'web').SNS_TEST_SIGNING_CERT).to.equal('/tmp/x.pem')
  })

  it('checks the delivery-feedback and branding settings', () => {
    expect(refusal({ SES_EVENTS_TOPIC_ARN: 'arn:aws:sqs:eu-west-1:123456789012:q' }, 'web').variables).to.deep.equal([
      'SES_EVENTS_TOPIC_ARN',
    ])
    expect(refusal({ DEFAULT_LOCALE: 'fr' }, 'web').variables).to.deep.equal(['DEFAULT_LOCALE'])
    expect(refusal({ PRODUCT_NAME: 'Evil\nBcc: x' }, 'worker').variables).to.deep.equal(['PRODUCT_NAME'])
    expect(refusal({ WASENDER_WEBHOOK_SECRET: 'short' }, 'web').variables).to.deep.equal(['WASENDER_WEBHOOK_SECRET'])
    expect(refusal({ SUPPORT_URL: 'javascript:alert(1)' }, 'worker').variables).to.deep.equal(['SUPPORT_URL'])
    const config = loadConfig(
      {
        SES_EVENTS_TOPIC_ARN: 'arn:aws:sns:eu-west-1:123456789012:sealpost-events',
        SES_CONFIGURATION_SET: 'sealpost',
        DEFAULT_LOCALE: 'de',
      },
      'web',
    )
    expect(config).to.include({ DEFAULT_LOCALE: 'de', PRODUCT_NAME: 'Sealpost', SES_CONFIGURATION_SET: 'sealpost' })
  })

  it('checks the Supabase hook settings: the verify path Supabase resolves, the content, the lifetimes', () => {
    for (const verifyPath of ['/auth/v1/verify', 'https://127.0.0.1:54321/auth/v1/verify'])
      expect(loadConfig({ SUPABASE_VERIFY_PATH: verifyPath }, 'web').SUPABASE_VERIFY_PATH).to.equal(verifyPath)
    // An http URL would make every link one the courier refuses; a query or fragment is Supabase's to add.
    for (const verifyPath of ['http://localhost:8000/auth/v1/verify', '//evil.example/verify', 'auth/v1/verify', '/verify?x=1', 'https://'])
      expect(refusal({ SUPABASE_VERIFY_PATH: verifyPath }, 'web').variables, verifyPath).to.deep.equal(['SUPABASE_VERIFY_PATH'])
    expect(refusal({ SUPABASE_EMAIL_CONTENT: 'html' }, 'web').variables).to.deep.equal(['SUPABASE_EMAIL_CONTENT'])
    expect(refusal({ SUPABASE_SMS_OTP_EXPIRY_SECONDS: '90000' }, 'web').variables).to.deep.equal(['SUPABASE_SMS_OTP_EXPIRY_SECONDS'])
    expect(loadConfig({}, 'web')).to.include({
      SUPABASE_EMAIL_CONTENT: 'both',
      SUPABASE_EMAIL_OTP_EXPIRY_SECONDS: 3_600,
      SUPABASE_SMS_OTP_EXPIRY_SECONDS: 60,
    })
  })

  it('has working development defaults with an empty environment', () => {
    const config = loadConfig({}, 'all-in-one')
    expect(config).to.include({
      NODE_ENV: 'development',
      CHALLENGE_TTL_SECONDS: 600,
      MAX_ATTEMPTS: 5,
      SEND_TIMEOUT_MS: 10_000,
      LEASE_SECONDS: 60,
    })
    expect(config.RETRY_SCHEDULE).to.deep.equal([5_000, 30_000, 120_000, 600_000, 1_800_000])
  })

  it('accepts a complete production environment for web and worker', () => {
    expect(loadConfig(production, 'web').OUTBOX_ENCRYPTION_KEY).to.have.length(32)
    expect(loadConfig(production, 'worker').SES_REGION).to.equal('eu-west-1')
  })

  for (const [role, variable, named] of [
    ['web', 'API_DATABASE_URL'],
    ['worker', 'WORKER_DATABASE_URL'],
    ['worker', 'SES_FROM_ADDRESS'],
    ['worker', 'INVITATION_LINK_BASE_URL'],
    ['worker', 'OUTBOX_ENCRYPTION_KEY', 'OUTBOX_ENCRYPTION_KEYS'],
    ['web', 'CODE_HASH_KEY', 'CODE_HASH_KEYS'],
    ['release', 'DATABASE_URL'],
  ] as const) {
    it(`stops the ${role} process in production without ${variable}, naming it`, () => {
      const env: Record<string, string> = { ...production }
      delete env[variable]
      const error = refusal(env, role)
      expect(error.variables).to.deep.equal([named ?? variable])
      expect(error.message).to.include(variable)
    })
  }

  it('starts a production worker with email settings only: no WASENDER_* means no phone channel, not a refusal', () => {
    const env: Record<string, string> = { ...production }
    delete env.WASENDER_API_URL
    delete env.WASENDER_API_KEY
    const config = loadConfig(env, 'worker')
    expect(config.SES_FROM_ADDRESS).to.equal('no-reply@example.com')
    expect(config.WASENDER_API_URL).to.equal(undefined)
  })

  for (const missing of ['WASENDER_API_URL', 'WASENDER_API_KEY']) {
    it(`refuses half a WhatsApp provider (${missing} unset, the other set), naming both and no value`, () => {
      for (const NODE_ENV of ['development', 'production']) {
        const env: Record<string, string> = { ...production, NODE_ENV }
        delete env[missing]
        const error = refusal(env, 'worker')
        expect(error.variables).to.have.members(['WASENDER_API_URL', 'WASENDER_API_KEY'])
        expect(error.message).to.not.include('wasender-key').and.not.include('wasender.example.com')
      }
    })
  }

  describe('WhatsApp Cloud API settings', () => {
    const cloud = {
      WHATSAPP_CLOUD_ACCESS_TOKEN: 'cloud-token-value',
      WHATSAPP_CLOUD_PHONE_NUMBER_ID: '106540352242922',
      WHATSAPP_CLOUD_TEMPLATE: 'sealpost_code',
    }
    const withoutWasender: Record<string, string> = { ...production }
    delete withoutWasender.WASENDER_API_URL
    delete withoutWasender.WASENDER_API_KEY

    it('picks the configured WhatsApp provider, pins a documented Graph API version, and maps locales to template languages', () => {
      const config = loadConfig({ ...withoutWasender, ...cloud }, 'worker')
      expect(whatsAppProvider(config)).to.equal('whatsapp_cloud')
      expect(config.WHATSAPP_CLOUD_API_URL).to.equal('https://graph.facebook.com/v25.0')
      expect(parseTemplateLanguages(config.WHATSAPP_CLOUD_TEMPLATE_LANGUAGES).fallback).to.equal('en_US')
      expect(whatsAppProvider(loadConfig(production, 'worker'))).to.equal('wasender')
      expect(whatsAppProvider(loadConfig(withoutWasender, 'worker'))).to.equal(null)
    })

    it('refuses both providers configured without WHATSAPP_PROVIDER, and a WHATSAPP_PROVIDER naming an unconfigured one', () => {
      expect(refusal({ ...production, ...cloud }, 'worker').variables).to.deep.equal(['WHATSAPP_PROVIDER'])
      expect(whatsAppProvider(loadConfig({ ...production, ...cloud, WHATSAPP_PROVIDER: 'wasender' }, 'worker'))).to.equal('wasender')
      expect(refusal({ ...withoutWasender, WHATSAPP_PROVIDER: 'wasender' }, 'worker').variables).to.deep.equal(['WHATSAPP_PROVIDER'])
      expect(refusal({ ...production, WHATSAPP_PROVIDER: 'cloud' }, 'worker').variables).to.deep.equal(['WHATSAPP_PROVIDER'])
    })

    it('refuses half a Cloud API account, naming what is missing and no value', () => {
      const error = refusal({ ...withoutWasender, WHATSAPP_CLOUD_ACCESS_TOKEN: 'cloud-token-value' }, 'worker')
      expect(error.variables).to.have.members(['WHATSAPP_CLOUD_PHONE_NUMBER_ID', 'WHATSAPP_CLOUD_TEMPLATE'])
      expect(error.message).to.not.include('cloud-token-value')
    })

    it('asks https:// of the Cloud API in staging and production but for a fake on this machine, and checks the template settings', () => {
      const env = { ...withoutWasender, ...cloud }
      expect(refusal({ ...env, WHATSAPP_CLOUD_API_URL: 'http://graph.example.com/v25.0' }, 'worker').variables).to.deep.equal([
        'WHATSAPP_CLOUD_API_URL',
      ])
      expect(loadConfig({ ...env, WHATSAPP_CLOUD_API_URL: 'http://127.0.0.1:9090' }, 'worker').WHATSAPP_CLOUD_API_URL).to.equal(
        'http://127.0.0.1:9090',
      )
      expect(refusal({ ...env, WHATSAPP_CLOUD_TEMPLATE_LANGUAGES: 'en=en_US' }, 'worker').variables).to.deep.equal([
        'WHATSAPP_CLOUD_TEMPLATE_LANGUAGES',
      ])
      expect(refusal({ ...env, WHATSAPP_CLOUD_TEMPLATE: 'Sealpost Code' }, 'worker').variables).to.deep.equal(['WHATSAPP_CLOUD_TEMPLATE'])
      expect(refusal({ ...env, WHATSAPP_CLOUD_APP_SECRET: 'short' }, 'web').variables).to.deep.equal(['WHATSAPP_CLOUD_APP_SECRET'])
    })
  })

  const twilio = {
    TWILIO_ACCOUNT_SID: `AC${'a'.repeat(32)}`,
    TWILIO_AUTH_TOKEN: 'twilio-auth-token-value',
    TWILIO_FROM_NUMBER: '+15005550006',
    PUBLIC_BASE_URL: 'https://sealpost.example.com',
  }

  it('starts a production web and worker with a complete Twilio configuration', () => {
    for (const role of ['web', 'worker'] as const)
      expect(loadConfig({ ...production, ...twilio }, role).TWILIO_API_URL).to.equal('https://api.twilio.com')
  })

  const halves: [string, Record<string, string | undefined>, string[]][] = [
    ['no account SID', { TWILIO_ACCOUNT_SID: undefined }, ['TWILIO_ACCOUNT_SID']],
    [
      'no auth token (it signs the callbacks, even beside an API key)',
      { TWILIO_AUTH_TOKEN: undefined, TWILIO_API_KEY_SID: `SK${'b'.repeat(32)}`, TWILIO_API_KEY_SECRET: 'twilio-api-key-secret' },
      ['TWILIO_AUTH_TOKEN'],
    ],
    ['an API key without its secret', { TWILIO_API_KEY_SID: `SK${'b'.repeat(32)}` }, ['TWILIO_API_KEY_SID', 'TWILIO_API_KEY_SECRET']],
    ['no sender', { TWILIO_FROM_NUMBER: undefined }, ['TWILIO_MESSAGING_SERVICE_SID', 'TWILIO_FROM_NUMBER']],
    ['two senders', { TWILIO_MESSAGING_SERVICE_SID: `MG${'c'.repeat(32)}` }, ['TWILIO_MESSAGING_SERVICE_SID', 'TWILIO_FROM_NUMBER']],
    ['no PUBLIC_BASE_URL in production', { PUBLIC_BASE_URL: undefined }, ['PUBLIC_BASE_URL']],
    ['a plain-http Twilio API URL off this machine', { TWILIO_API_URL: 'http://api.twilio.example' }, ['TWILIO_API_URL']],
    ['a plain-http PUBLIC_BASE_URL', { PUBLIC_BASE_URL: 'http://sealpost.example.com' }, ['PUBLIC_BASE_URL']],
  ]
  for (const [name, change, variables] of halves) {
    it(`refuses half a Twilio configuration (${name}), naming ${variables.join(' and ')} and no value`, () => {
      const env = Object.fromEntries(
        Object.entries({ ...production, ...twilio, ...change }).filter(([, value]) => value !== undefined),
      ) as Record<string, string>
      const error = refusal(env, 'worker')
      expect(error.variables).to.have.members(variables)
      expect(error.message).to.not.include('twilio-auth-token-value').and.not.include('twilio-api-key-secret')
    })
  }

  it('starts a production worker without any code-hash key: the worker never hashes a code', () => {
    const env: Record<string, string> = { ...production }
    delete env.CODE_HASH_KEY
    expect(loadConfig(env, 'worker').CODE_HASH_KEYS).to.equal(undefined)
  })

  it('reads OUTBOX_ENCRYPTION_KEYS / CODE_HASH_KEYS rings, and a single key as the ring 0:<key>', () => {
    const other = randomBytes(32).toString('base64')
    const env: Record<string, string> = {
      ...production,
      OUTBOX_ENCRYPTION_KEYS: `new:${other},0:${key}`,
      CODE_HASH_KEYS: `new:${other},0:${key}`,
    }
    const config = loadConfig(env, 'web')
    expect(config.OUTBOX_ENCRYPTION_KEYS!.map((entry) => entry.id)).to.deep.equal(['new', '0'])
    expect(config.CODE_HASH_KEYS![0].key.toString('base64')).to.equal(other)
    const single = loadConfig(production, 'web').OUTBOX_ENCRYPTION_KEYS!
    expect(single.map((entry) => [entry.id, entry.key.toString('base64')])).to.deep.equal([['0', key]])
  })

  it('refuses a single key set beside a ring that does not hold it, and a malformed ring, without printing a key', () => {
    const other = randomBytes(32).toString('base64')
    const mismatch = refusal({ ...production, OUTBOX_ENCRYPTION_KEYS: `new:${other}` }, 'web')
    expect(mismatch.variables).to.deep.equal(['OUTBOX_ENCRYPTION_KEY'])
    const malformed = refusal({ ...production, CODE_HASH_KEYS: `${other}` }, 'web')
    expect(malformed.variables).to.deep.equal(['CODE_HASH_KEYS'])
    for (const error of [mismatch, malformed]) expect(error.message).not.to.include(other.slice(0, 12)).and.not.to.include(key.slice(0, 12))
  })

  it('refuses http:// provider and link URLs in staging and production, naming each; plain http only to a relay on this machine', () => {
    for (const NODE_ENV of ['production', 'staging']) {
      const error = refusal(
        {
          ...production,
          NODE_ENV,
          WASENDER_API_URL: 'http://wasender.example.com',
          SES_ENDPOINT: 'http://email.eu-west-1.amazonaws.com',
          INVITATION_LINK_BASE_URL: 'http://localhost:3000',
        },
        'worker',
      )
      expect(error.variables).to.have.members(['WASENDER_API_URL', 'SES_ENDPOINT', 'INVITATION_LINK_BASE_URL'])
      expect(error.message).to.include('must be an https:// URL')
    }
    expect(
      loadConfig({ ...production, WASENDER_API_URL: 'http://127.0.0.1:8080', SES_ENDPOINT: 'http://localhost:8005' }, 'worker')
        .SES_ENDPOINT,
    ).to.equal('http://localhost:8005')
    expect(
      loadConfig({ ...production, NODE_ENV: 'development', INVITATION_LINK_BASE_URL: 'http://localhost:3000' }, 'worker')
        .INVITATION_LINK_BASE_URL,
    ).to.equal('http://localhost:3000')
  })

  it('leaves the breached-password check off unless configured, and asks https:// of it in production but for a mirror on this machine', () => {
    const off = loadConfig(production, 'web')
    expect([off.BREACHED_PASSWORD_API_URL, off.BREACHED_PASSWORD_TIMEOUT_MS]).to.deep.equal([undefined, 2_000])
    const error = refusal({ ...production, BREACHED_PASSWORD_API_URL: 'http://api.pwnedpasswords.com' }, 'web')
    expect(error.variables).to.deep.equal(['BREACHED_PASSWORD_API_URL'])
    expect(error.message).to.include('must be an https:// URL')
    for (const url of ['https://api.pwnedpasswords.com', 'http://127.0.0.1:8089'])
      expect(loadConfig({ ...production, BREACHED_PASSWORD_API_URL: url }, 'web').BREACHED_PASSWORD_API_URL).to.equal(url)
  })

  it('takes SEALPOST_API_ROLE and SEALPOST_WORKER_ROLE together or not at all, as two different plain role names', () => {
    expect(
      loadConfig(
        {
          ...production,
          DATABASE_URL: 'postgres://owner@db.internal/sealpost',
          SEALPOST_API_ROLE: 'u_web',
          SEALPOST_WORKER_ROLE: 'u_worker',
        },
        'release',
      ),
    ).to.include({ SEALPOST_API_ROLE: 'u_web', SEALPOST_WORKER_ROLE: 'u_worker' })
    expect(refusal({ ...production, SEALPOST_API_ROLE: 'u_web' }, 'release').variables).to.deep.equal(['SEALPOST_WORKER_ROLE'])
    expect(refusal({ ...production, SEALPOST_API_ROLE: 'same', SEALPOST_WORKER_ROLE: 'same' }, 'release').variables).to.deep.equal([
      'SEALPOST_WORKER_ROLE',
    ])
    expect(
      refusal({ ...production, SEALPOST_API_ROLE: 'web"; DROP ROLE x; --', SEALPOST_WORKER_ROLE: 'u_worker' }, 'release').variables,
    ).to.deep.equal(['SEALPOST_API_ROLE'])
  })

  it('refuses the all-in-one developer mode in production', () => {
    expect(refusal(production, 'all-in-one').variables).to.deep.equal(['NODE_ENV'])
  })

  it('names an invalid variable without printing its value', () => {
    const badKey = Buffer.from('too-short-key').toString('base64')
    const error = refusal({ ...production, OUTBOX_ENCRYPTION_KEY: badKey, API_DATABASE_URL: 'not a url with hunter2' }, 'web')
    expect(error.variables).to.have.members(['OUTBOX_ENCRYPTION_KEY', 'API_DATABASE_URL'])
    expect(error.message).not.to.include(badKey)
    expect(error.message).not.to.include('hunter2')
  })

  it("refuses a lease shorter than two send timeouts plus 5 s where it is applied (release); the worker reads the queue's instead", () => {
    expect(refusal({ SEND_TIMEOUT_MS: '10000', LEASE_SECONDS: '24' }, 'release').variables).to.deep.equal(['LEASE_SECONDS'])
    expect(loadConfig({ SEND_TIMEOUT_MS: '10000', LEASE_SECONDS: '24' }, 'worker').LEASE_SECONDS).to.equal(24)
    expect(refusal({ SEND_TIMEOUT_MS: '10000', LEASE_SECONDS: '24' }, 'all-in-one').variables).to.deep.equal(['LEASE_SECONDS'])
    expect(loadConfig({ SEND_TIMEOUT_MS: '10000', LEASE_SECONDS: '25' }, 'all-in-one').LEASE_SECONDS).to.equal(25)
  })

  it('refuses a cron that is invalid or more frequent than pg-boss honours, naming the variable', () => {
    expect(() => cronIntervalSeconds('every now and then', 'EXPIRY_PURGE_CRON')).to.throw(ConfigError, 'EXPIRY_PURGE_CRON')
    expect(() => cronIntervalSeconds('*/10 * * * * *', 'EXPIRY_PURGE_CRON')).to.throw(ConfigError, 'more than once a minute')
    expect(cronIntervalSeconds('* * * * *', 'EXPIRY_PURGE_CRON')).to.equal(60)
    expect(cronIntervalSeconds('17 3 * * *', 'RETENTION_SWEEP_CRON')).to.equal(86_400)
  })

  it('parses retry schedules and refuses nonsense', () => {
    expect(parseSchedule('500ms, 5s,2m,1h')).to.deep.equal([500, 5_000, 120_000, 3_600_000])
    expect(refusal({ RETRY_SCHEDULE: '5s,soon' }, 'all-in-one').variables).to.deep.equal(['RETRY_SCHEDULE'])
    expect(refusal({ RETRY_SCHEDULE: '5s', MAX_ATTEMPTS: '5' }, 'all-in-one').variables).to.deep.equal(['RETRY_SCHEDULE'])
  })

  it('reads the send caps (none by default) and refuses an unknown channel or calling code, naming the variable', () => {
    const none = loadConfig({}, 'all-in-one')
    expect(none.SEND_CAP_PER_HOUR).to.deep.equal({})
    expect(none.PHONE_CAP_PER_COUNTRY_PER_HOUR).to.deep.equal({})
    const capped = loadConfig(
      { SEND_CAP_PER_HOUR: 'email:20000,whatsapp:2000', PHONE_CAP_PER_COUNTRY_PER_HOUR: '44:500,*:200' },
      'all-in-one',
    )
    expect(capped.SEND_CAP_PER_HOUR).to.deep.equal({ email: 20000, whatsapp: 2000 })
    expect(capped.PHONE_CAP_PER_COUNTRY_PER_HOUR).to.deep.equal({ '44': 500, '*': 200 })
    expect(refusal({ SEND_CAP_PER_HOUR: 'fax:10' }, 'all-in-one').variables).to.deep.equal(['SEND_CAP_PER_HOUR'])
    expect(refusal({ PHONE_CAP_PER_COUNTRY_PER_HOUR: '4:10' }, 'all-in-one').variables).to.deep.equal(['PHONE_CAP_PER_COUNTRY_PER_HOUR'])
  })

  it('sets the SMS hourly cap by one variable: SMS_HOURLY_CAP (never released) stops every process, naming the SEND_CAP_PER_HOUR line to write', () => {
    for (const role of ['web', 'worker', 'release', 'cli', 'all-in-one'] as const) {
      const refused = refusal({ SMS_HOURLY_CAP: '500', SEND_CAP_PER_HOUR: 'email:9' }, role)
      expect(refused.variables, role).to.deep.equal(['SMS_HOURLY_CAP'])
      expect(refused.message, role).to.include('SEND_CAP_PER_HOUR=sms:<the same count>').and.not.include('500')
    }
    expect(loadConfig({ SMS_HOURLY_CAP: '' }, 'worker').SEND_CAP_PER_HOUR, 'blank is unset').to.deep.equal({})
  })

  it('reads the SMS guards (none by default, mobiles only) and refuses a country that is not ISO 3166 alpha-2, naming the variable', () => {
    const none = loadConfig({}, 'all-in-one')
    for (const unset of ['SMS_PREFIX_HOURLY_CAP', 'SMS_ALLOWED_COUNTRIES'] as const) expect(none[unset], unset).to.equal(undefined)
    expect(none).to.include({ PHONE_ALLOW_FIXED_LINE: 'false', PHONE_ALLOW_VOIP: 'false' })
    const set = loadConfig({ SEND_CAP_PER_HOUR: 'sms:500', SMS_PREFIX_HOURLY_CAP: '20', SMS_ALLOWED_COUNTRIES: 'gb, IE,DE' }, 'all-in-one')
    expect(set.SEND_CAP_PER_HOUR).to.deep.equal({ sms: 500 })
    expect(set).to.include({ SMS_PREFIX_HOURLY_CAP: 20 })
    expect(set.SMS_ALLOWED_COUNTRIES).to.deep.equal(['GB', 'IE', 'DE'])
    expect(refusal({ SMS_ALLOWED_COUNTRIES: 'GB,UK1' }, 'all-in-one').variables).to.deep.equal(['SMS_ALLOWED_COUNTRIES'])
    expect(refusal({ SMS_PREFIX_HOURLY_CAP: '-1' }, 'all-in-one').variables).to.deep.equal(['SMS_PREFIX_HOURLY_CAP'])
  })

  it('reads the owner-side settings: the courier share of the caps, hook link origins and budget, trusted trace callers', () => {
    const none = loadConfig({}, 'all-in-one')
    expect(none.COURIER_CAP_SHARE).to.equal(undefined)
    expect(none).to.deep.include({ SUPABASE_LINK_ORIGINS: [], KRATOS_LINK_ORIGINS: [], HOOK_DESTINATION_HOURLY_BUDGET: 600 })
    expect(none.TRACE_TRUSTED_CALLERS).to.deep.equal([])
    const set = loadConfig(
      {
        COURIER_CAP_SHARE: '30',
        SUPABASE_LINK_ORIGINS: 'https://ref.supabase.co, https://Auth.Bücher.example/',
        TRACE_TRUSTED_CALLERS: '10.0.0.0/8, loopback',
      },
      'all-in-one',
    )
    expect(set.COURIER_CAP_SHARE).to.equal(30)
    expect(set.SUPABASE_LINK_ORIGINS, 'as a browser compares them').to.deep.equal([
      'https://ref.supabase.co',
      'https://auth.xn--bcher-kva.example',
    ])
    expect(set.TRACE_TRUSTED_CALLERS).to.deep.equal(['10.0.0.0/8', 'loopback'])
    for (const [variable, bad] of [
      ['COURIER_CAP_SHARE', '0'],
      ['COURIER_CAP_SHARE', '100'],
      ['SUPABASE_LINK_ORIGINS', 'http://ref.supabase.co'],
      ['KRATOS_LINK_ORIGINS', 'https://auth.example.org/self-service'],
      ['TRACE_TRUSTED_CALLERS', 'the office'],
      ['HOOK_DESTINATION_HOURLY_BUDGET', '0'],
    ] as const)
      expect(refusal({ [variable]: bad }, 'all-in-one').variables, `${variable}=${bad}`).to.deep.equal([variable])
  })

  it('reads PHONE_CHANNELS as the phone channels in fallback order (unset: the fleet decides, WhatsApp first) and refuses anything else', () => {
    expect(loadConfig({}, 'all-in-one').PHONE_CHANNELS).to.equal(undefined)
    expect(loadConfig({ PHONE_CHANNELS: 'sms, whatsapp' }, 'all-in-one').PHONE_CHANNELS).to.deep.equal(['sms', 'whatsapp'])
    expect(loadConfig({ PHONE_CHANNELS: 'sms' }, 'all-in-one').PHONE_CHANNELS).to.deep.equal(['sms'])
    for (const bad of ['email', 'whatsapp,whatsapp', 'whatsapp,', 'telegram'])
      expect(refusal({ PHONE_CHANNELS: bad }, 'all-in-one').variables).to.deep.equal(['PHONE_CHANNELS'])
  })

  describe('email providers', () => {
    const relay = 'smtp://relay-user:hunter2%40pass@smtp.example.com:587'

    it('reads EMAIL_PROVIDERS as an ordered list (default ses) and refuses unknown, repeated or empty entries, naming the variable', () => {
      expect(loadConfig({}, 'worker').EMAIL_PROVIDERS).to.deep.equal(['ses'])
      expect(loadConfig({ EMAIL_PROVIDERS: 'smtp, ses', SMTP_URL: relay }, 'worker').EMAIL_PROVIDERS).to.deep.equal(['smtp', 'ses'])
      expect(parseEmailProviders('ses,smtp')).to.deep.equal(['ses', 'smtp'])
      for (const EMAIL_PROVIDERS of ['ses,ses', 'ses,sendgrid', ' , ', 'ses,'])
        expect(refusal({ EMAIL_PROVIDERS }, 'worker').variables, EMAIL_PROVIDERS).to.deep.equal(['EMAIL_PROVIDERS'])
    })

    it('refuses an SMTP_URL that is not smtp:// or smtps:// without printing it (it holds the password)', () => {
      for (const SMTP_URL of ['https://relay-user:hunter2@smtp.example.com', 'smtp://', 'relay-user:hunter2@smtp.example.com:587']) {
        const error = refusal({ SMTP_URL }, 'worker')
        expect(error.variables).to.deep.equal(['SMTP_URL'])
        expect(error.message).not.to.include('hunter2').and.not.to.include('relay-user')
      }
      expect(loadConfig({ SMTP_URL: relay }, 'worker').SMTP_URL).to.equal(relay)
      expect(loadConfig({ SMTP_URL: 'smtps://u:p@smtp.example.com:465' }, 'worker').SMTP_URL).to.equal('smtps://u:p@smtp.example.com:465')
    })

    it('stops a worker whose EMAIL_PROVIDERS lists smtp without SMTP_URL, in every environment; the web does not send', () => {
      for (const NODE_ENV of ['development', 'test', 'staging', 'production']) {
        const env = { ...production, NODE_ENV, EMAIL_PROVIDERS: 'ses,smtp' }
        expect(refusal(env, 'worker').variables, NODE_ENV).to.deep.equal(['SMTP_URL'])
      }
      expect(refusal({ EMAIL_PROVIDERS: 'smtp' }, 'all-in-one').variables).to.deep.equal(['SMTP_URL'])
      expect(loadConfig({ ...production, EMAIL_PROVIDERS: 'smtp' }, 'web').EMAIL_PROVIDERS).to.deep.equal(['smtp'])
    })

    it('starts a production worker that sends through SMTP alone without any SES setting, but not without a from-address', () => {
      const env: Record<string, string> = {
        ...production,
        EMAIL_PROVIDERS: 'smtp',
        SMTP_URL: relay,
        SMTP_FROM_ADDRESS: 'codes@example.com',
      }
      delete env.SES_REGION
      delete env.SES_FROM_ADDRESS
      expect(loadConfig(env, 'worker')).to.include({ SMTP_URL: relay, SMTP_FROM_ADDRESS: 'codes@example.com' })
      delete env.SMTP_FROM_ADDRESS
      const error = refusal(env, 'worker')
      expect(error.variables).to.deep.equal(['SMTP_FROM_ADDRESS'])
      expect(error.message).not.to.include('hunter2')
      expect(loadConfig({ ...env, SES_FROM_ADDRESS: 'no-reply@example.com' }, 'worker').SES_FROM_ADDRESS).to.equal('no-reply@example.com')
    })

    it('still asks a production worker for the SES settings when ses is listed, first or second', () => {
      const env: Record<string, string> = { ...production, EMAIL_PROVIDERS: 'smtp,ses', SMTP_URL: relay }
      delete env.SES_REGION
      expect(refusal(env, 'worker').variables).to.deep.equal(['SES_REGION'])
    })

    it('allows plain SMTP only to a relay on this machine in development and test; smtp:// requires STARTTLS everywhere else', () => {
      const cases: [string, string, boolean][] = [
        ['test', 'smtp://127.0.0.1:2525', true],
        ['development', 'smtp://localhost:1025', true],
        ['development', 'smtp://[::1]:1025', true],
        ['development', 'smtp://mail.example.com:587', false],
        ['development', 'smtps://127.0.0.1:465', false],
        ['staging', 'smtp://127.0.0.1:25', false],
        ['production', 'smtp://localhost:25', false],
      ]
      for (const [NODE_ENV, SMTP_URL, plain] of cases)
        expect(smtpPlainAllowed({ NODE_ENV: NODE_ENV as 'test', SMTP_URL }), `${NODE_ENV} ${SMTP_URL}`).to.equal(plain)
      expect(smtpPlainAllowed({ NODE_ENV: 'test', SMTP_URL: undefined })).to.equal(false)
    })
  })
})
