import { randomBytes } from 'node:crypto'
import { expect } from 'chai'
import { ConfigError, loadConfig, parseSchedule } from '../config/schema.ts'
import { cronIntervalSeconds } from '../src/runtime/worker.ts'

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
    expect(refusal({ SES_EVENTS_TOPIC_ARN: 'arn:aws:sqs:eu-west-1:123456789012:q' }, 'web').variables).to.deep.equal(['SES_EVENTS_TOPIC_ARN'])
    expect(refusal({ DEFAULT_LOCALE: 'fr' }, 'web').variables).to.deep.equal(['DEFAULT_LOCALE'])
    expect(refusal({ PRODUCT_NAME: 'Evil\nBcc: x' }, 'worker').variables).to.deep.equal(['PRODUCT_NAME'])
    expect(refusal({ WASENDER_WEBHOOK_SECRET: 'short' }, 'web').variables).to.deep.equal(['WASENDER_WEBHOOK_SECRET'])
    expect(refusal({ SUPPORT_URL: 'javascript:alert(1)' }, 'worker').variables).to.deep.equal(['SUPPORT_URL'])
    const config = loadConfig({ SES_EVENTS_TOPIC_ARN: 'arn:aws:sns:eu-west-1:123456789012:sealpost-events', SES_CONFIGURATION_SET: 'sealpost', DEFAULT_LOCALE: 'de' }, 'web')
    expect(config).to.include({ DEFAULT_LOCALE: 'de', PRODUCT_NAME: 'Sealpost', SES_CONFIGURATION_SET: 'sealpost' })
  })

  it('has working development defaults with an empty environment', () => {
    const config = loadConfig({}, 'all-in-one')
    expect(config).to.include({ NODE_ENV: 'development', CHALLENGE_TTL_SECONDS: 600, MAX_ATTEMPTS: 5, SEND_TIMEOUT_MS: 10_000, LEASE_SECONDS: 60 })
    expect(config.RETRY_SCHEDULE).to.deep.equal([5_000, 30_000, 120_000, 600_000, 1_800_000])
  })

  it('accepts a complete production environment for web and worker', () => {
    expect(loadConfig(production, 'web').OUTBOX_ENCRYPTION_KEY).to.have.length(32)
    expect(loadConfig(production, 'worker').SES_REGION).to.equal('eu-west-1')
  })

  for (const [role, variable] of [['web', 'API_DATABASE_URL'], ['worker', 'WORKER_DATABASE_URL'], ['worker', 'SES_FROM_ADDRESS'], ['worker', 'WASENDER_API_KEY'], ['web', 'CODE_HASH_KEY'], ['release', 'DATABASE_URL']] as const) {
    it(`stops the ${role} process in production without ${variable}, naming it`, () => {
      const env: Record<string, string> = { ...production }
      delete env[variable]
      const error = refusal(env, role)
      expect(error.variables).to.deep.equal([variable])
      expect(error.message).to.include(variable)
    })
  }

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

  it('refuses a lease shorter than two send timeouts plus 5 s', () => {
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
})
