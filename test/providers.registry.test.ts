import { expect } from 'chai'
import { existsSync } from 'node:fs'
import path from 'node:path'
import { coreSchema } from '../config/schema.ts'
import { PROVIDER_IDS } from '../src/outbox/constants.ts'
import { CHANNEL_SHAPE } from '../src/providers/channels.ts'
import { envSchema, loadConfig } from '../src/providers/config.ts'
import { PROVIDERS } from '../src/providers/registry.ts'
import { bindWebhooks, providersFromConfig, WEBHOOK_ROUTES } from '../src/providers/wiring.ts'

const ROOT = path.resolve(import.meta.dirname, '..')
const folderOf = (id: string) => `src/providers/${id.replaceAll('_', '-')}`

describe('the provider registry (src/providers/registry.ts)', () => {
  it('lists exactly the provider ids the database accepts (PROVIDER_IDS, mirrored by the CHECKs: a new provider comes with its migration)', () => {
    expect(PROVIDERS.map((provider) => provider.id).sort()).to.deep.equal([...PROVIDER_IDS].sort())
  })

  it('keeps each provider in its own folder: definition, connector, fault mapping, settings slice, and its webhook where it has one', () => {
    for (const provider of PROVIDERS) {
      const folder = folderOf(provider.id)
      for (const file of ['index.ts', 'connector.ts', 'faults.ts', 'settings.ts'])
        expect(existsSync(path.join(ROOT, folder, file)), `${folder}/${file}`).to.equal(true)
      expect(existsSync(path.join(ROOT, folder, 'webhook.ts')), `${folder}/webhook.ts`).to.equal(provider.webhook !== undefined)
    }
  })

  it('composes the environment schema from the core, the channel choices and every slice, each variable owned once', () => {
    const owners = new Map<string, string>()
    const claim = (variable: string, owner: string) => {
      expect(owners.get(variable), `${variable}: ${owner}`).to.equal(undefined)
      owners.set(variable, owner)
    }
    for (const variable of Object.keys(coreSchema.shape)) claim(variable, 'core')
    for (const variable of Object.keys(CHANNEL_SHAPE)) claim(variable, 'channels')
    for (const provider of PROVIDERS)
      for (const variable of Object.keys(provider.settings.shape)) {
        expect(variable, `${provider.id} documents ${variable}`).to.be.oneOf(Object.keys(provider.settings.docs))
        claim(variable, provider.id)
      }
    expect([...owners.keys()].sort()).to.deep.equal(Object.keys(envSchema.shape).sort())
  })

  it('wires each selected provider to a connector of its own id and channel', () => {
    const config = loadConfig(
      {
        NODE_ENV: 'test',
        EMAIL_PROVIDERS: 'smtp,ses',
        SMTP_URL: 'smtp://127.0.0.1:2525',
        WASENDER_API_URL: 'http://127.0.0.1:9',
        WASENDER_API_KEY: 'k',
        TWILIO_ACCOUNT_SID: `AC${'a'.repeat(32)}`,
        TWILIO_AUTH_TOKEN: 'twilio-auth-token-01',
        TWILIO_FROM_NUMBER: '+15005550006',
      },
      'worker',
    )
    const connectors = providersFromConfig(config)
    try {
      expect(connectors.map((connector) => `${connector.channel}:${connector.id}`)).to.deep.equal([
        'email:smtp',
        'email:ses',
        'whatsapp:wasender',
        'sms:twilio',
      ])
      for (const connector of connectors)
        expect(PROVIDERS.find((provider) => provider.id === connector.id)?.channel, connector.id).to.equal(connector.channel)
    } finally {
      connectors.forEach((connector) => connector.close())
    }
  })

  it('mounts every provider’s webhook routes, each once, bound whether or not the provider is configured', () => {
    const routes = WEBHOOK_ROUTES.map((route) => `${route.method} ${route.path}`)
    expect(new Set(routes).size).to.equal(routes.length)
    expect(new Set(WEBHOOK_ROUTES.map((route) => route.operationId)).size).to.equal(WEBHOOK_ROUTES.length)
    for (const provider of PROVIDERS)
      for (const route of provider.webhook?.routes ?? []) expect(route.path, provider.id).to.match(/^\/webhooks\//)
    expect(bindWebhooks(undefined).map(({ route }) => route.operationId)).to.deep.equal(WEBHOOK_ROUTES.map((route) => route.operationId))
    expect(bindWebhooks(undefined).every(({ settings }) => settings === undefined)).to.equal(true)
  })
})
