import { leakGuardHooks } from './leak-guard.ts'
import { startTestCluster, type TestCluster } from './cluster.ts'

let cluster: TestCluster | undefined

/** The run's PostgreSQL server; started once by the root hook below. */
export function testCluster(): TestCluster {
  if (!cluster) throw new Error('the test cluster is not running (root hook missing?)')
  return cluster
}

export const mochaHooks = {
  beforeAll: [
    // First: every suite gets its leak checks before anything is created (test/support/leak-guard.ts).
    leakGuardHooks.beforeAll,
    async function (this: Mocha.Context) {
      this.timeout(120_000)
      cluster = await startTestCluster()
    },
  ],
  afterAll: [
    async function (this: Mocha.Context) {
      this.timeout(60_000)
      await cluster?.stop()
    },
    // Last: whatever the run itself made must be gone by now.
    leakGuardHooks.afterAll,
  ],
}
