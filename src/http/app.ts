import express from 'express'
import type { Knex } from 'knex'
import type { ChallengeDeps } from '../identity/challenges.ts'
import type { Logger } from '../logging/logger.ts'
import { HttpProblem, problemHandler, sendProblem } from './problem.ts'
import { healthRoutes } from './routes/health.ts'
import { identityRoutes } from './routes/identity.ts'
import { organizationRoutes } from './routes/organizations.ts'
import { platformAdminRoutes } from './routes/platform-admin.ts'
import { createWebMetrics } from '../metrics/web-metrics.ts'
import type { InvitationDeps } from '../organization/invitations.ts'
import { openApiDocument } from './openapi.ts'
import type { WebhookDeps } from '../delivery/webhooks.ts'
import { webhookRoutes } from './routes/webhooks.ts'
import { suppressionRoutes } from './routes/suppressions.ts'
import { negotiatedLocale } from './locale.ts'
import type { Locale } from '../delivery/locales.ts'

export type WebDeps = {
  db: Knex; challenges: ChallengeDeps; invitations: InvitationDeps; logger: Logger; clientLimitPerMinute: number
  /** Provider webhooks (DESIGN §12); each refuses everything while unconfigured. */
  webhooks?: Pick<WebhookDeps, 'ses' | 'wasender'>
  /** The locale of messages whose request's Accept-Language names none we ship. */
  defaultLocale?: Locale
}

/** The Express app: thin routes over use cases, every error mapped by problemHandler. */
export function createApp(deps: WebDeps): express.Express {
  const app = express()
  app.disable('x-powered-by')
  app.set('trust proxy', false)
  app.use((req, res, next) => {
    const started = performance.now()
    res.on('finish', () => {
      deps.logger.info('request', { method: req.method, route: req.route?.path ?? 'unmatched', status: res.statusCode, durationMs: Math.round(performance.now() - started) })
    })
    next()
  })
  const metrics = createWebMetrics(deps.db, deps.challenges.clock)
  // Before the JSON parser: the webhooks read their bodies as their providers send them.
  app.use(webhookRoutes({ db: deps.db, clock: deps.challenges.clock, logger: deps.logger, count: metrics.webhook, ...deps.webhooks }))
  app.use(express.json({ limit: '16kb', strict: true }))
  app.use(negotiatedLocale(deps.defaultLocale ?? 'en'))
  app.use(healthRoutes(deps.db))
  const openapi = openApiDocument()
  app.get('/openapi.json', (_req, res) => {
    res.json(openapi)
  })
  app.use(identityRoutes({ db: deps.db, challenges: deps.challenges, clientLimitPerMinute: deps.clientLimitPerMinute }))
  app.use(organizationRoutes({ db: deps.db, invitations: deps.invitations }))
  app.use(platformAdminRoutes({ db: deps.db, reissue: { boss: deps.challenges.boss, outboxKey: deps.challenges.outboxKey, codeHashKey: deps.challenges.codeHashKey, clock: deps.challenges.clock } }))
  app.use(suppressionRoutes({ db: deps.db, clock: deps.challenges.clock }))
  app.get('/metrics', async (_req, res) => {
    res.type(metrics.registry.contentType).send(await metrics.render())
  })
  app.use((_req, res) => sendProblem(res, new HttpProblem(404, 'not_found', 'No such route.')))
  app.use(problemHandler(deps.logger))
  return app
}
