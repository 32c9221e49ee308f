import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { randomUUID } from 'node:crypto'
import { seal } from '../src/crypto/envelope.ts'
import { newWebhookSecret } from '../src/crypto/webhook-signature.ts'
import { createBoss } from '../src/db/boss.ts'
import { createKnex } from '../src/db/knex.ts'
import { createLogger } from '../src/logging/logger.ts'
import { resolveWithDns } from '../src/platform/webhook-address-guard.ts'
import { secretContext } from '../src/platform/webhook-endpoints.ts'
import { startWebhooks, WEBHOOK_WORK } from '../src/runtime/events-out.ts'
import type { startBenchStack } from './stack.ts'

const ALLOWED = ['127.0.0.1']

/**
 * Event fan-out: `events` events appended in one statement (the triggers' own path), fanned out to
 * `endpoints` local receivers (each answers 204 at once), and delivered by one worker's own
 * events-out queues (`startWebhooks`: the fan-out job, then one `webhook-delivery` job per
 * delivery under WEBHOOK_WORK's concurrency), signed, through the SSRF-guarded agents.
 * Deliveries per second from the append to the last record.
 */
export async function eventFanOut(
  stack: Awaited<ReturnType<typeof startBenchStack>>,
  options: { endpoints: number; events: number },
): Promise<{ perSecond: number }> {
  const servers: Server[] = []
  const ids: string[] = []
  for (let n = 0; n < options.endpoints; n++) {
    const server = createServer((req, res) => {
      req.resume()
      req.on('end', () => res.writeHead(204).end())
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    servers.push(server)
    const id = randomUUID()
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`
    await stack.owner('platform.webhook_endpoints').insert({
      id,
      url,
      events: ['identity.created'],
      secret_envelope: seal(stack.keys.outboxKey, Buffer.from(newWebhookSecret()), secretContext(id, url)),
      created_at: new Date(),
      created_by: randomUUID(),
    })
    ids.push(id)
  }
  const logger = createLogger({ level: 'error' })
  const db = createKnex(stack.workerUrl, { applicationName: 'bench-events-worker', max: WEBHOOK_WORK.concurrency + 4, logger })
  const boss = createBoss(stack.workerUrl, 'worker', logger)
  await boss.start()
  const webhooks = await startWebhooks({
    db,
    boss,
    config: {
      NODE_ENV: 'test',
      WEBHOOK_ALLOWED_HOSTS: ALLOWED,
      WEBHOOK_RETRY_SCHEDULE: [1_000],
      WEBHOOK_MAX_ATTEMPTS: 5,
      SEND_TIMEOUT_MS: 5_000,
      MAX_PROVIDER_PAUSE_SECONDS: 60,
    },
    keys: stack.keys,
    clock: () => new Date(),
    logger,
    resolve: resolveWithDns,
  })
  const total = options.endpoints * options.events
  const delivered = async () =>
    Number(
      (await stack.owner('platform.webhook_deliveries').whereIn('endpoint_id', ids).where({ state: 'delivered' }).count({ n: '*' }))[0]!.n,
    )
  try {
    const started = performance.now()
    await stack.owner.raw(
      `SELECT platform.append_event('identity.created', jsonb_build_object('identityId', gen_random_uuid())) FROM generate_series(1, ?)`,
      [options.events],
    )
    while ((await delivered()) < total) await new Promise((resolve) => setTimeout(resolve, 20))
    return { perSecond: total / ((performance.now() - started) / 1000) }
  } finally {
    await webhooks.stop()
    await boss.stop({ graceful: false })
    await db.destroy()
    await stack.owner('platform.webhook_endpoints').whereIn('id', ids).update({ disabled_at: new Date() })
    await stack.owner('platform.events').where({ type: 'identity.created' }).delete()
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))))
  }
}
