import type { DeliveryDeps, DeliveryJob } from '../../jobs/delivery-deps.ts'
import { runOnce } from '../../src/runtime/delivery-pipeline.ts'

/** One fetched job through the worker's own pipeline (`runOnce`): claim, send, record, settled. */
export const deliverOne = (deps: DeliveryDeps, job: DeliveryJob) => runOnce(deps, [job])

/** Fetched jobs through the worker's own pipeline as one fetch's batch; resolves with the jobs failed back to pg-boss. */
export const deliverBatch = (deps: DeliveryDeps, jobs: readonly DeliveryJob[]) => runOnce(deps, jobs)
