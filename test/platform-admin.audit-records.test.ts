import { randomBytes } from 'node:crypto'
import { expect } from 'chai'
import { uuidv7 } from 'uuidv7'
import { parseIdentifier } from '../src/identity/identifiers.ts'
import { hashToken } from '../src/identity/secrets.ts'
import { runRetentionSweep } from '../jobs/retention-sweep.ts'
import { createKnex } from '../src/db/knex.ts'
import { changeStaff } from '../src/platform/staff.ts'
import { createVerifiedIdentity, uniqueEmail } from './support/helpers.ts'
import { useWebStack } from './support/web-stack.ts'

const BASE = '/platform-admin/audit-records'
const DAY_MS = 24 * 3600 * 1000

describe('staff: the audit trail', () => {
  const f = useWebStack({ worker: false })

  async function person(staff: boolean) {
    const email = uniqueEmail(staff ? 'staff' : 'person')
    const { identityId } = await createVerifiedIdentity(f.db.owner, email)
    const token = randomBytes(32).toString('base64url')
    await f.db
      .owner('identity.sessions')
      .insert({ id: uuidv7(), identity_id: identityId, token_hash: hashToken(token), expires_at: new Date(Date.now() + 3_600_000) })
    if (staff) expect(await changeStaff(f.db.owner, 'grant', parseIdentifier(email)!, 'test', new Date())).to.equal('granted')
    return { email, identityId, auth: f.stack.bearer(token) }
  }
  const record = async (at: Date, action: string, actor: string, subject: string) => {
    const id = uuidv7()
    await f.db.owner('platform.audit_records').insert({ id, at, actor, action, subject, details: { reason: 'complaint' } })
    return id
  }
  type Item = { id: string; at: string; actor: string; action: string; subject: string | null }
  type Page = { items: Item[]; pageInfo: { hasNextPage: boolean; endCursor: string | null }; code?: string }
  const page = async (auth: Record<string, string>, query: string) => {
    const answer = await f.stack.call('GET', `${BASE}?${query}`, undefined, auth)
    return { status: answer.status, body: answer.body as Page | undefined }
  }

  it('answers 401 without a session and 403 not_staff to anyone who is not staff, revoked staff included', async () => {
    expect((await f.stack.call('GET', BASE)).status).to.equal(401)
    expect((await page((await person(false)).auth, '')).body?.code).to.equal('not_staff')
    const revoked = await person(true)
    expect(await changeStaff(f.db.owner, 'revoke', parseIdentifier(revoked.email)!, 'test', new Date())).to.equal('revoked')
    expect((await page(revoked.auth, '')).body?.code).to.equal('not_staff')
  })

  it('pages newest first by keyset, and filters by action, actor, subject and time range', async () => {
    const staff = await person(true)
    const subject = uuidv7()
    const base = Date.parse('2031-01-01T00:00:00Z')
    const ids: string[] = []
    for (let i = 0; i < 5; i += 1) ids.push(await record(new Date(base + i * 60_000), 'test.paged', 'actor-a', subject))
    const other = await record(new Date(base + 90_000), 'test.other', 'actor-b', subject)

    const first = await page(staff.auth, `action=test.paged&limit=2`)
    expect(first.status).to.equal(200)
    expect(first.body!.items.map((item) => item.id)).to.deep.equal([ids[4], ids[3]])
    expect(first.body!.pageInfo.hasNextPage).to.equal(true)
    const second = await page(staff.auth, `action=test.paged&limit=2&after=${first.body!.pageInfo.endCursor}`)
    expect(second.body!.items.map((item) => item.id)).to.deep.equal([ids[2], ids[1]])
    const third = await page(staff.auth, `action=test.paged&limit=2&after=${second.body!.pageInfo.endCursor}`)
    expect(third.body!.items.map((item) => item.id)).to.deep.equal([ids[0]])
    expect(third.body!.pageInfo.hasNextPage).to.equal(false)

    expect((await page(staff.auth, `actor=actor-b`)).body!.items.map((item) => item.action)).to.deep.equal(['test.other'])
    expect((await page(staff.auth, `subject=${subject}`)).body!.items).to.have.length(6)
    const from = new Date(base + 60_000).toISOString()
    const to = new Date(base + 180_000).toISOString()
    const ranged = await page(staff.auth, `subject=${subject}&from=${from}&to=${to}`)
    expect(ranged.body!.items.map((item) => item.id)).to.deep.equal([ids[2], other, ids[1]])
  })

  it('answers bad filters and cursors with a problem, never a 500', async () => {
    const staff = await person(true)
    for (const query of ['limit=0', 'limit=500', 'from=yesterday', 'colour=red', 'from=2031-01-02T00:00:00Z&to=2031-01-01T00:00:00Z'])
      expect((await page(staff.auth, query)).status, query).to.equal(422)
    expect((await page(staff.auth, 'after=bm90LWEtY3Vyc29y')).body?.code).to.equal('invalid_cursor')
  })

  it('shows what staff did through the routes, with no address in it', async () => {
    const staff = await person(true)
    const trail = await page(staff.auth, `action=staff.grant&subject=${staff.identityId}`)
    expect(trail.body!.items).to.have.length(1)
    expect(trail.body!.items[0]).to.include({ actor: 'test', action: 'staff.grant', subject: staff.identityId })
    expect(JSON.stringify(trail.body)).to.not.include(staff.email)
  })

  it('keeps records for RETENTION_AUDIT_DAYS: the sweep deletes older ones only', async () => {
    const now = new Date()
    const old = await record(new Date(now.getTime() - 11 * DAY_MS), 'test.retention', 'actor-r', 'old')
    const recent = await record(new Date(now.getTime() - 9 * DAY_MS), 'test.retention', 'actor-r', 'recent')
    const worker = createKnex(f.db.workerUrl, { applicationName: 'audit-retention', max: 1 })
    await runRetentionSweep({
      db: worker,
      clock: () => now,
      logger: f.logs.logger,
      publishedDays: 30,
      deadLetteredDays: 90,
      auditDays: 10,
    }).finally(() => worker.destroy())
    const left = await f.db.owner('platform.audit_records').whereIn('id', [old, recent]).pluck('id')
    expect(left).to.deep.equal([recent])
  })

  it('lets no worker login sweep the trail away: a clock far ahead or a keep of nothing deletes nothing under a week old', async () => {
    const recent = await record(new Date(Date.now() - 2 * DAY_MS), 'test.retention', 'actor-w', 'recent')
    const worker = createKnex(f.db.workerUrl, { applicationName: 'audit-retention-attack', max: 1 })
    try {
      await worker.raw("SELECT * FROM platform.sweep('9999-01-01', 1000, '0')")
    } finally {
      await worker.destroy()
    }
    expect(await f.db.owner('platform.audit_records').where({ id: recent }).pluck('id')).to.deep.equal([recent])
  })
})
