import { randomBytes } from 'node:crypto'
import { expect } from 'chai'
import { issueHidden } from '../src/identity/challenge-issue.ts'
import { DESTINATION_BUDGET } from '../src/identity/challenges.ts'
import { canonicalDestination } from '../src/identity/identifiers.ts'
import { spendTiersTx, tiersWait, type Tier } from '../src/identity/rate-limits.ts'
import { bucketKeys } from '../src/identity/secrets.ts'
import { capturingLogger, testKeys, uniqueEmail } from './support/helpers.ts'
import { openWebSide, webChallengeDeps, type WebSide } from './support/web-side.ts'

/**
 * A budget of several tiers has one rule (migration 20261206007000): it fits when every tier has
 * room and then spends one hit in each; refused, it spends nothing and answers the longest wait.
 * The anonymous issue's copy (`platform.spend_budget_tiers` of 20261202000400) spent in order and
 * stopped at the first tier without room: these are the behaviours that differed.
 */
describe('tiered budgets: one rule', () => {
  let side: WebSide
  const keys = testKeys()
  const logs = capturingLogger()

  before(async () => {
    side = await openWebSide(logs.logger)
  })
  after(() => side.close())

  const hitsUnder = async (key: Buffer) =>
    Number((await side.db.owner('platform.rate_limit_hits').where({ bucket_key: key }).count('* as n'))[0]!.n)
  const seed = async (key: Buffer, at: Date) => side.db.owner('platform.rate_limit_hits').insert({ bucket_key: key, hit_at: at })
  const later = (now: Date, seconds: number) => new Date(now.getTime() + seconds * 1_000)

  it('a client refused by the ceiling keeps its own slice on the anonymous issue: a recovery refused spends nothing', async () => {
    const email = uniqueEmail('ceiling')
    const deps = webChallengeDeps(side.boss, keys, logs.logger)
    const target = { purpose: 'password_recovery' as const, identifier: { kind: 'email' as const, value: email }, asked: 'owner' as const }
    const slice = bucketKeys(keys, 'destination:email', `${canonicalDestination(target.identifier)}|client:alice-network`)[0]!
    const start = new Date()
    const issue = (client: string, at: Date) =>
      issueHidden(side.api, deps, 'password recovery', target, { now: at, claim: 'none', requester: { client } })

    await issue('alice-network', start)
    for (let i = 1; i < DESTINATION_BUDGET.ceiling.max; i += 1) await issue(`stranger-${i}`, later(start, i))
    expect(await hitsUnder(slice), 'the client’s slice after its one recovery').to.equal(1)

    await issue('alice-network', later(start, 60))
    expect(await hitsUnder(slice), 'refused by the ceiling: the slice is not spent').to.equal(1)
    expect(logs.text()).to.include('"message":"password recovery not enqueued"')
  })

  it('answers the longest wait of the tiers without room, not the first one’s', async () => {
    const now = new Date()
    const [short, long] = [randomBytes(32), randomBytes(32)]
    const tiers: Tier[] = [
      { bucket: short, limit: { max: 1, windowSeconds: 60 } },
      { bucket: long, limit: { max: 1, windowSeconds: 3_600 } },
    ]
    await seed(short, later(now, -10))
    await seed(long, later(now, -10))
    // Short's hit leaves its window in 50 s, long's in 3 590 s: a retry fits after the longer.
    expect(await side.api.transaction((trx) => spendTiersTx(trx, tiers, now))).to.equal(3_590)
    expect(await side.api.transaction((trx) => tiersWait(trx, tiers, now))).to.equal(3_590)
    const { rows } = await side.api.raw<{ rows: { wait: number }[] }>('SELECT platform.spend_budget_tiers(?::jsonb, ?) AS wait', [
      JSON.stringify([
        { buckets: [short.toString('hex')], max: 1, window_seconds: 60 },
        { buckets: [long.toString('hex')], max: 1, window_seconds: 3_600 },
      ]),
      now,
    ])
    expect(rows[0]!.wait, 'the SQL function the previous release’s issue calls answers the same').to.equal(3_590)
  })

  it('spends one hit in every tier when all have room, under each tier’s current key, and none when one is full', async () => {
    const now = new Date()
    const [current, previous, ceiling] = [randomBytes(32), randomBytes(32), randomBytes(32)]
    const tiers: Tier[] = [
      { bucket: [current, previous], limit: { max: 2, windowSeconds: 60 } },
      { bucket: ceiling, limit: { max: 2, windowSeconds: 60 } },
    ]
    expect(await side.api.transaction((trx) => spendTiersTx(trx, tiers, now))).to.equal(undefined)
    expect([await hitsUnder(current), await hitsUnder(previous), await hitsUnder(ceiling)]).to.deep.equal([1, 0, 1])
    await seed(ceiling, later(now, -30))
    expect(await side.api.transaction((trx) => spendTiersTx(trx, tiers, now))).to.equal(30)
    expect([await hitsUnder(current), await hitsUnder(ceiling)], 'refused: nothing spent').to.deep.equal([1, 2])
  })

  it('refuses a budget of no tiers', async () => {
    const failure = await side.api
      .transaction((trx) => spendTiersTx(trx, [], new Date()))
      .then(
        () => undefined,
        (error: { code?: string }) => error.code,
      )
    expect(failure).to.equal('22023')
  })
})
