import { startTestCluster, type TestCluster } from './cluster.ts'

let cluster: TestCluster | undefined

/** The run's PostgreSQL server; started once by the root hook below. */
export function testCluster(): TestCluster {
  if (!cluster) throw new Error('the test cluster is not running (root hook missing?)')
  return cluster
}

export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(120_000)
    cluster = await startTestCluster()
  },
  async afterAll(this: Mocha.Context) {
    this.timeout(60_000)
    await cluster?.stop()
  },
}
