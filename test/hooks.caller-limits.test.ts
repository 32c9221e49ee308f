import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { expect } from 'chai'
import { HOOK_CALLERS } from '../src/hooks/hook-delivery.ts'
import { useWebStack } from './support/web-stack.ts'

const RECOVERY_CODE = JSON.parse(readFileSync(new URL('./fixtures/hooks/kratos-courier-recovery-code.json', import.meta.url), 'utf8'))
const KRATOS_KEY = 'kratos-courier-key-for-caller-limit-tests-0123'
/** What 20261202002800_hook_callers wrote in the rows, which nothing read: 20 codes an address an hour. */
const ROW_PER_DESTINATION_PER_HOUR = 20

/**
 * A hook caller's scopes and limits have one home, `HOOK_CALLERS` under the deployment's settings
 * (docs/hooks.md "Budgets"); its `platform.api_keys` row only attributes its messages
 * (migration 20261206007100).
 */
describe("hook callers' limits: one home", () => {
  let now = new Date()
  const f = useWebStack({
    worker: false,
    clock: () => now,
    webhooks: { KRATOS_COURIER_API_KEY: KRATOS_KEY, KRATOS_LINK_ORIGINS: ['https://auth.example.org'], HOOK_DESTINATION_HOURLY_BUDGET: 3 },
  })
  beforeEach(() => {
    now = new Date(now.getTime() + 2 * 3_600_000)
  })
  const kratos = (to: string, code: string) =>
    f.stack.call(
      'POST',
      '/hooks/kratos/courier',
      { ...RECOVERY_CODE, recipient: to, to, recovery_code: code },
      { authorization: `Bearer ${KRATOS_KEY}` },
    )

  it('a hook caller’s row holds no scope or limit, and the database keeps it so (a key’s row must hold them)', async () => {
    const rows = await f.db.owner('platform.api_keys').whereIn(
      'id',
      Object.values(HOOK_CALLERS).map((caller) => caller.apiKeyId),
    )
    expect(rows).to.have.length(2)
    for (const row of rows) {
      expect(row, row.name).to.include({ kind: 'hook', purposes: null, channels: null, requests_per_minute: null })
      expect(row, row.name).to.include({
        per_destination_per_hour: null,
        per_destination_per_day: null,
        sends_per_hour: null,
        destinations_per_hour: null,
      })
    }
    const refusal = (change: Record<string, unknown>) =>
      f.db
        .owner('platform.api_keys')
        .where({ id: HOOK_CALLERS.kratos.apiKeyId })
        .update(change)
        .then(
          () => 'written',
          (error: { code?: string }) => error.code,
        )
    expect(await refusal({ per_destination_per_hour: 20 }), 'a limit on a hook’s row').to.equal('23514')
    expect(await refusal({ kind: 'key' }), 'a key without limits').to.equal('23514')
  })

  it('a hook’s per-address budget is HOOK_DESTINATION_HOURLY_BUDGET’s, not what its row said', async () => {
    expect(ROW_PER_DESTINATION_PER_HOUR).not.to.equal(3)
    const to = `erin.${randomBytes(3).toString('hex')}@corp.example`
    const statuses: unknown[] = []
    for (let i = 0; i < 4; i++) {
      const answer = await kratos(to, String(20_000_000 + i))
      statuses.push(answer.body?.code ?? answer.status)
    }
    expect(statuses).to.deep.equal([200, 200, 200, 'destination_budget_exhausted'])
  })
})
