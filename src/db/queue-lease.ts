import type { Knex } from 'knex'
import { fromKnex, PgBoss } from 'pg-boss'
import { minimumLeaseSeconds } from '../../config/schema.ts'
import { QUEUES } from './queues.ts'
import { SealpostError } from '../errors/sealpost-error.ts'

/** The queue's lease is too short for this worker's send timeout, or the queue is missing. */
export class QueueLeaseError extends SealpostError {
  override name = 'QueueLeaseError'
}

/**
 * One lease truth (docs/architecture.md §8, decision 9): the lease is what the release step wrote into the delivery queues
 * (LEASE_SECONDS), never a worker's own setting. Read at start through pg-boss (over the worker's
 * pool, no second pool): a lease below 2 × SEND_TIMEOUT_MS + 5 s would let a job expire mid-send
 * and be handed to another worker (a duplicate code or event), so the worker refuses to start.
 * Both queues whose handlers send (messages and events out) are checked; the first one's lease is returned.
 */
export async function checkQueueLease(db: Knex, sendTimeoutMs: number): Promise<number> {
  const probe = new PgBoss({ db: fromKnex(db), supervise: false, schedule: false, migrate: false })
  const leases: number[] = []
  for (const name of [QUEUES.delivery, QUEUES.webhookDelivery]) {
    const queue = await probe.getQueue(name)
    if (!queue) throw new QueueLeaseError(`the queue ${name} does not exist: run the release step`)
    const lease = queue.expireInSeconds
    const needed = minimumLeaseSeconds(sendTimeoutMs)
    if (lease === undefined || lease < needed) {
      throw new QueueLeaseError(
        `the queue ${name} leases a job for ${lease ?? 'an unknown number of'} s (expireInSeconds), below 2 × SEND_TIMEOUT_MS + 5 s = ${needed} s for SEND_TIMEOUT_MS=${sendTimeoutMs}: ` +
          `run the release step with LEASE_SECONDS of at least ${Math.ceil(needed)} (or lower SEND_TIMEOUT_MS)`,
      )
    }
    leases.push(lease)
  }
  return leases[0]!
}
