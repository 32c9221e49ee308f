import type { Knex } from 'knex'
import type { PgBoss } from 'pg-boss'
import type { WebhookDeliverDeps, WebhookJobData } from '../../jobs/webhook-deliver.ts'
import { fanOutWebhooksOnce } from '../../jobs/webhook-fan-out.ts'
import { createBoss } from '../../src/db/boss.ts'
import { createKnex } from '../../src/db/knex.ts'
import { QUEUES } from '../../src/db/queues.ts'
import { createWebhookPost } from '../../src/delivery/webhook-sender.ts'
import type { Logger } from '../../src/logging/logger.ts'
import { guardedLookup, resolveWithDns, type Resolve } from '../../src/platform/webhook-address-guard.ts'
import type { Keys } from '../../src/runtime/dev-keys.ts'
import { runWebhookJobsOnce, type WebhookRunOutcome } from '../../src/runtime/webhook-loop.ts'
import type { TestDatabase } from './database.ts'

/** What one step of the worker came to, job by job (`failed`: the handler threw, and the job went back to pg-boss). */
export type WebhookStep = Record<'delivered' | 'retried' | 'deadLettered' | 'stale' | 'leaseLost' | 'failed' | 'jobs' | 'claimed', number>

const COUNTED: Record<WebhookRunOutcome, keyof WebhookStep> = {
  delivered: 'delivered',
  retried: 'retried',
  dead_lettered: 'deadLettered',
  stale: 'stale',
  lease_lost: 'leaseLost',
  failed: 'failed',
}

/**
 * Events out one step at a time, with the clock in the test's hands: the worker's own fan-out and
 * delivery loop (`runWebhookJobsOnce`) over the worker login, on jobs the test fetches itself. A
 * job due by the test's clock is made due by the database's before the fetch (pg-boss compares
 * `start_after` with the database's now). Registers its own before/after hooks.
 */
export function useWebhookKit(
  f: { readonly db: TestDatabase; keys: Keys; logs: { logger: Logger } },
  options: { allowedHosts: string[]; resolve?: Resolve; clock?: () => Date; timeoutMs?: number },
) {
  const clock = options.clock ?? (() => new Date())
  let db: Knex
  let boss: PgBoss
  const post = createWebhookPost({
    lookup: guardedLookup({ allowedHosts: options.allowedHosts, resolve: options.resolve ?? resolveWithDns }),
    timeoutMs: options.timeoutMs ?? 2_000,
  })
  before(async () => {
    db = createKnex(f.db.workerUrl, { applicationName: 'webhook-kit-worker', max: 8 })
    // The worker login's pg-boss as the web runs it (no supervisor, cron or LISTEN): the test fetches.
    boss = createBoss(f.db.workerUrl, 'web', f.logs.logger)
    await boss.start()
  })
  after(async () => {
    post.close()
    await boss?.stop({ graceful: false })
    await db?.destroy()
  })

  const kit = {
    get db() {
      return db
    },
    get boss() {
      return boss
    },
    post,
    deps(overrides: Partial<WebhookDeliverDeps> = {}): WebhookDeliverDeps {
      return {
        db,
        boss,
        outboxKey: f.keys.outboxKey,
        post,
        addresses: { production: false, allowedHosts: options.allowedHosts },
        settings: { maxAttempts: 3, retrySchedule: [5_000, 60_000], maxRetryAfterSeconds: 300 },
        clock,
        logger: f.logs.logger,
        ...overrides,
      }
    },
    /** The fan-out job's run: new events' deliveries and their jobs, and jobs for redriven deliveries. */
    fanOut: () => fanOutWebhooksOnce({ db, boss, clock, logger: f.logs.logger }),
    /** The fan-out, then every delivery job due by the test's clock through the worker's loop, side by side. */
    async deliverDue(overrides: Partial<WebhookDeliverDeps> = {}): Promise<WebhookStep> {
      await kit.fanOut()
      await boss
        .getDb()
        .executeSql(`UPDATE pgboss.job SET start_after = now() WHERE name = $1 AND state IN ('created', 'retry') AND start_after <= $2`, [
          QUEUES.webhookDelivery,
          clock(),
        ])
      const jobs = await boss.fetch<WebhookJobData>(QUEUES.webhookDelivery, { batchSize: 100 })
      const step: WebhookStep = {
        jobs: jobs.length,
        claimed: 0,
        delivered: 0,
        retried: 0,
        deadLettered: 0,
        stale: 0,
        leaseLost: 0,
        failed: 0,
      }
      for (const outcome of await runWebhookJobsOnce(kit.deps(overrides), jobs)) step[COUNTED[outcome]] += 1
      step.claimed = step.jobs - step.stale
      return step
    },
  }
  return kit
}
