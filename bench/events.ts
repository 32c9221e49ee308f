import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { randomUUID } from 'node:crypto'
import { deliverWebhooksOnce } from '../jobs/webhook-deliver.ts'
import { seal } from '../src/crypto/envelope.ts'
import { newWebhookSecret } from '../src/crypto/webhook-signature.ts'
import { createWebhookPost } from '../src/delivery/webhook-sender.ts'
import { createLogger } from '../src/logging/logger.ts'
import { guardedLookup, resolveWithDns } from '../src/platform/webhook-address-guard.ts'
import { secretContext } from '../src/platform/webhook-endpoints.ts'
import type { startBenchStack } from './stack.ts'

const ALLOWED = ['127.0.0.1']

/**
 * Event fan-out: `events` events appended in one statement (the triggers' own path), fanned out to
 * `endpoints` local receivers (each answers 204 at once), and delivered by `loops` concurrent
 * passes of the worker's own `deliverWebhooksOnce`, signed, through the SSRF-guarded agents.
 * Deliveries per second from the append to the last record.
 */
export async function eventFanOut(
  stack: Awaited<ReturnType<typeof startBenchStack>>,
  options: { endpoints: number; events: number; loops: number },
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
  const post = createWebhookPost({ lookup: guardedLookup({ allowedHosts: ALLOWED, resolve: resolveWithDns }), timeoutMs: 5_000 })
  const deps = {
    db: stack.owner,
    outboxKey: stack.keys.outboxKey,
    post,
    addresses: { production: false, allowedHosts: ALLOWED },
    settings: { maxAttempts: 5, retrySchedule: [1_000], maxRetryAfterSeconds: 60 },
    leaseSeconds: 60,
    batchSize: 64,
    clock: () => new Date(),
    logger: createLogger({ level: 'error' }),
  }
  const total = options.endpoints * options.events
  let delivered = 0
  try {
    const started = performance.now()
    await stack.owner.raw(
      `SELECT platform.append_event('identity.created', jsonb_build_object('identityId', gen_random_uuid())) FROM generate_series(1, ?)`,
      [options.events],
    )
    await Promise.all(
      Array.from({ length: options.loops }, async () => {
        while (delivered < total) {
          const counts = await deliverWebhooksOnce(deps)
          delivered += counts.delivered
          if (counts.claimed === 0) await new Promise((resolve) => setTimeout(resolve, 5))
        }
      }),
    )
    return { perSecond: total / ((performance.now() - started) / 1000) }
  } finally {
    post.close()
    await stack.owner('platform.webhook_endpoints').whereIn('id', ids).update({ disabled_at: new Date() })
    await stack.owner('platform.events').where({ type: 'identity.created' }).delete()
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))))
  }
}
