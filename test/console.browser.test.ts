import { expect } from 'chai'
import { randomBytes } from 'node:crypto'
import { uuidv7 } from 'uuidv7'
import type { Page } from 'playwright-core'
import { parseIdentifier } from '../src/identity/identifiers.ts'
import { destinationHmac } from '../src/outbox/destination.ts'
import { changeStaff } from '../src/platform/staff.ts'
import { launchChromium } from './support/browser.ts'
import { insertFailedDeadLetter } from './support/dead-letters.ts'
import { eventually, inbox, uniqueEmail, uniquePhone } from './support/helpers.ts'
import { useWebStack } from './support/web-stack.ts'

const password = 'correct horse battery'

describe('operator console in headless Chromium', function () {
  this.timeout(120_000)
  const f = useWebStack()
  let browser: Awaited<ReturnType<typeof launchChromium>>
  before(async () => {
    browser = await launchChromium()
  })
  after(async () => {
    await browser?.close()
  })

  const codeFor = async (email: string, count: number) => {
    const mails = await eventually(async () => {
      const all = await inbox(f.stack.emulator.url, email)
      return all.length >= count ? all : undefined
    }, `email ${count} to ${email}`)
    return /\b(\d{6})\b/.exec(mails[count - 1]!.body.text ?? '')![1]!
  }
  async function account(email: string) {
    expect((await f.stack.call('POST', '/sign-ups', { identifier: email, password })).status).to.equal(202)
    expect(
      (await f.stack.call('POST', '/sign-ups/confirmation', { identifier: email, code: await codeFor(email, 1), password })).status,
    ).to.equal(201)
  }
  async function signInThroughTheForm(page: Page, email: string) {
    await page.fill('#sign-in-form input[name=identifier]', email)
    await page.fill('#sign-in-form input[name=password]', password)
    await page.click('#sign-in-form button[type=submit]')
  }

  it("runs an operator's session: sign in, backlog, dead-letter pages, one message's history, reissue after step-up, sign out", async () => {
    const { page, shot, problems } = browser
    const staff = uniqueEmail('operator')
    const stranger = uniqueEmail('stranger')
    await account(staff)
    await account(stranger)
    expect(await changeStaff(f.db.owner, 'grant', parseIdentifier(staff)!, 'test', new Date())).to.equal('granted')
    // 24 dead letters, newest first: the one to reissue on page 1, the rest over pages 1–3.
    const destinations: string[] = []
    for (let i = 0; i < 23; i += 1) {
      const destination = i % 3 === 0 ? uniquePhone() : uniqueEmail(`customer${i}`)
      destinations.push(destination)
      await insertFailedDeadLetter(f.db.owner, {
        destination,
        failures: i % 2 ? ['REJECTED'] : ['UNAVAILABLE', 'UNAVAILABLE'],
        reason: i % 2 ? 'provider_rejected' : 'retries_exhausted',
        at: new Date(Date.now() - (i + 2) * 60_000),
      })
    }
    const alice = uniqueEmail('alice.smith')
    destinations.push(alice)
    const dead = await insertFailedDeadLetter(f.db.owner, {
      destination: alice,
      failures: ['UNAVAILABLE', 'THROTTLED', 'INDETERMINATE', 'UNAVAILABLE', 'UNAVAILABLE'],
    })

    const consolePage = await page.goto(`${f.stack.web.url}/platform-admin/`)
    expect(consolePage!.headers()['content-security-policy'])
      .to.include("script-src 'self'")
      .and.include("style-src 'self';")
      .and.not.include('unsafe-inline')
    await shot('01-sign-in')

    // Same refusals as the JSON routes: an account that is not staff gets in nowhere.
    await signInThroughTheForm(page, stranger)
    await page.waitForSelector('#notice.error:has-text("not staff")')
    expect(await page.isVisible('#console')).to.equal(false)
    expect(await page.evaluate(() => sessionStorage.getItem('sealpost.session'))).to.equal(null)
    await shot('02-not-staff')

    await signInThroughTheForm(page, staff)
    await page.waitForSelector('#dead-letter-rows tr')
    expect(await page.textContent('#who-text')).to.include(staff)
    expect(await page.textContent('#states')).to.match(/dead lettered\s*24/)
    expect(await page.textContent('#reasons'))
      .to.match(/retries_exhausted\s*13/)
      .and.match(/provider_rejected\s*11/)
    expect(await page.locator('#dead-letter-rows tr').count()).to.equal(10)
    await page.waitForSelector('#suppressions:not([hidden])')
    // The token is in this tab's sessionStorage and nowhere in a cookie; the only cookie is the
    // device cookie of the sign-in (HttpOnly: the page's scripts cannot read it), which is no token.
    const session = await page.evaluate(() => sessionStorage.getItem('sealpost.session'))
    expect(session).to.be.a('string')
    const cookies = await browser.context.cookies()
    expect(cookies.map((cookie) => [cookie.name, cookie.httpOnly, cookie.sameSite])).to.deep.equal([['sealpost_device', true, 'Strict']])
    expect(session, 'the session token is in no cookie').not.to.include(cookies[0]!.value)
    expect(await page.evaluate('document.cookie'), 'no script reads the device cookie').to.equal('')
    await shot('03-backlog-and-dead-letters')

    // Page through all 24 and back; no full destination is ever on screen.
    const seen: string[] = []
    const rowIds = async () =>
      Promise.all((await page.locator('#dead-letter-rows tr').all()).map(async (row) => (await row.getAttribute('data-message-id'))!))
    seen.push(...(await rowIds()))
    for (const expected of ['page 2', 'page 3']) {
      const before = (await rowIds())[0]
      await page.click('#older')
      await page.waitForSelector(`#dead-letter-rows tr:first-child:not([data-message-id="${before}"])`)
      expect(await page.textContent('#page-label')).to.equal(expected)
      seen.push(...(await rowIds()))
      for (const destination of destinations) expect(await page.textContent('body')).not.to.include(destination)
    }
    expect(new Set(seen).size).to.equal(24)
    expect(await page.isDisabled('#older')).to.equal(true)
    await shot('04-dead-letters-page-3')
    await page.click('#newer')
    await page.waitForSelector('#page-label:text-is("page 2")')
    await page.click('#newer')
    await page.waitForSelector('#page-label:text-is("page 1")')
    expect(await page.isDisabled('#newer')).to.equal(true)

    // One message's history.
    await page.click(`#dead-letter-rows tr[data-message-id="${dead.messageId}"] button`)
    await page.waitForSelector('#message:not([hidden])')
    expect(await page.locator('#attempt-rows tr').count()).to.equal(5)
    expect(await page.textContent('#attempt-rows'))
      .to.include('THROTTLED')
      .and.include('INDETERMINATE')
    expect(await page.textContent('#message-facts'))
      .to.match(/a•••\w@e•••\.com/)
      .and.not.include(alice)
    expect(await page.textContent('#dead-letter-facts')).to.include('retries_exhausted')
    await shot('05-message-history')

    // Reissue: step-up first (the code comes by email), then the reissue itself.
    await page.click('#reissue')
    await page.waitForSelector('#step-up:not([hidden])')
    await page.click('#send-step-up')
    await page.waitForSelector('#step-up-form:not([hidden])')
    await shot('06-step-up')
    await page.fill('#step-up-form input[name=code]', '000000')
    await page.click('#step-up-form button[type=submit]')
    await page.waitForSelector('#notice.error:has-text("wrong")')
    await page.fill('#step-up-form input[name=code]', await codeFor(staff, 2))
    await page.click('#step-up-form button[type=submit]')
    await page.waitForSelector('#notice:has-text("Reissued")')
    const reissued = await f.db
      .owner('outbox.security_outbox_messages')
      .where({ challenge_id: dead.challengeId })
      .whereNot({ id: dead.messageId })
      .first()
    expect(reissued, 'a new message for the same challenge').to.not.equal(undefined)
    await page.waitForSelector(`#message-id:text-is("${reissued.id}")`)
    expect(
      await f.db.owner('platform.audit_records').where({ action: 'security_outbox.dead_letter_reissued', subject: dead.messageId }),
    ).to.have.length(1)
    await eventually(
      async () => ((await inbox(f.stack.emulator.url, alice)).length === 1 ? true : undefined),
      'the reissued code reaches alice',
    )
    await shot('07-reissued')
    // Any message opens by id, e.g. one a log line named; an unknown id is said so.
    await page.click('#close-message')
    await page.fill('#open-form input[name=messageId]', dead.messageId)
    await page.click('#open-form button')
    await page.waitForSelector(`#message-id:text-is("${dead.messageId}")`)
    await page.fill('#open-form input[name=messageId]', 'not-a-message')
    await page.click('#open-form button')
    await page.waitForSelector('#notice.error:has-text("no message with that id")')

    // Sign out: the session token stops working.
    const token = (await page.evaluate(() => sessionStorage.getItem('sealpost.session')))!
    await page.click('#sign-out')
    await page.waitForSelector('#sign-in:not([hidden])')
    expect(
      (await f.stack.call('GET', '/platform-admin/security-outbox/backlog', undefined, f.stack.bearer(JSON.parse(token)))).status,
    ).to.equal(401)
    await shot('08-signed-out')

    expect(problems, 'no CSP refusal or script error on the page').to.deep.equal([])
  })

  it('shows the staff member the refusal of a reissue whose row names another address than its challenge', async () => {
    const { page, shot, problems } = browser
    const staff = uniqueEmail('operator')
    await account(staff)
    expect(await changeStaff(f.db.owner, 'grant', parseIdentifier(staff)!, 'test', new Date())).to.equal('granted')
    const attacker = uniqueEmail('attacker')
    const tampered = await insertFailedDeadLetter(f.db.owner, {
      destination: attacker,
      identifier: uniqueEmail('victim'),
      failures: ['UNAVAILABLE'],
    })
    await page.goto(`${f.stack.web.url}/platform-admin/`)
    await page.evaluate(() => sessionStorage.clear())
    await page.reload()
    await signInThroughTheForm(page, staff)
    await page.waitForSelector(`#dead-letter-rows tr[data-message-id="${tampered.messageId}"]`)
    await page.click(`#dead-letter-rows tr[data-message-id="${tampered.messageId}"] button`)
    await page.waitForSelector('#message:not([hidden])')
    await page.click('#reissue')
    await page.click('#send-step-up')
    await page.fill('#step-up-form input[name=code]', await codeFor(staff, 2))
    await page.click('#step-up-form button[type=submit]')
    await page.waitForSelector('#notice.error:has-text("reissue_destination_mismatch")')
    expect(await page.textContent('#notice')).to.include('Security')
    await shot('12-reissue-refused-tampered-row')
    expect(await f.db.owner('outbox.security_outbox_messages').where({ destination: attacker }), 'nothing new queued').to.have.length(1)
    expect(await page.textContent('body')).not.to.include(attacker)
    await page.click('#sign-out')
    expect(problems).to.deep.equal([])
  })

  it('tells the staff member why a reissue to a suppressed destination is refused, and reissues once the suppression is lifted', async () => {
    const { page, problems } = browser
    const staff = uniqueEmail('operator')
    await account(staff)
    expect(await changeStaff(f.db.owner, 'grant', parseIdentifier(staff)!, 'test', new Date())).to.equal('granted')
    const bounced = uniqueEmail('bounced')
    const hmac = randomBytes(32)
    const dead = await insertFailedDeadLetter(f.db.owner, {
      destination: bounced,
      failures: [],
      reason: 'destination_suppressed',
      destinationHmac: hmac,
    })
    await f.db.owner('outbox.suppressed_destinations').insert({
      id: uuidv7(),
      destination_hmac: hmac,
      channel: 'email',
      masked_destination: 'b•••d@e•••.com',
      reason: 'permanent_bounce',
      since: new Date(),
      message_id: dead.messageId,
    })
    await page.goto(`${f.stack.web.url}/platform-admin/`)
    await page.evaluate(() => sessionStorage.clear())
    await page.reload()
    await signInThroughTheForm(page, staff)
    await page.click(`#dead-letter-rows tr[data-message-id="${dead.messageId}"] button`)
    await page.waitForSelector('#message:not([hidden])')
    await page.click('#reissue')
    await page.click('#send-step-up')
    await page.fill('#step-up-form input[name=code]', await codeFor(staff, 2))
    await page.click('#step-up-form button[type=submit]')
    await page.waitForSelector('#notice.error:has-text("destination_suppressed")')
    expect(await page.textContent('#notice')).to.include('Lift its suppression')
    expect(
      await f.db.owner('outbox.security_outbox_messages').where({ challenge_id: dead.challengeId }),
      'nothing new queued',
    ).to.have.length(1)
    // Lifted in the console's own panel (the step-up still holds), the same reissue goes.
    await page.click('#suppression-rows button')
    await page.waitForSelector('#notice:has-text("Suppression lifted")')
    await page.click('#reissue')
    await page.waitForSelector('#notice:has-text("Reissued")')
    expect(await f.db.owner('outbox.security_outbox_messages').where({ challenge_id: dead.challengeId })).to.have.length(2)
    await page.click('#sign-out')
    expect(problems).to.deep.equal([])
  })

  it('finds messages by destination, shows provider event counts, redrives the dead letters of a reason and lifts a pause, after one step-up', async () => {
    const { page, shot, problems } = browser
    const staff = uniqueEmail('operator')
    await account(staff)
    expect(await changeStaff(f.db.owner, 'grant', parseIdentifier(staff)!, 'test', new Date())).to.equal('granted')
    const alice = uniqueEmail('alice.redrive')
    const dead = await insertFailedDeadLetter(f.db.owner, {
      destination: alice,
      failures: ['UNAVAILABLE'],
      reason: 'worker_crash_loop',
      destinationHmac: destinationHmac(f.keys.codeHashKey, 'email', alice),
      providers: ['ses'],
    })
    await f.db
      .owner('outbox.security_outbox_delivery_events')
      .insert({ message_id: dead.messageId, event: 'bounced', subtype: 'Transient', occurred_at: new Date() })
    await f.db
      .owner('outbox.provider_pauses')
      .insert({ channel: 'whatsapp', paused_until: new Date(Date.now() + 300_000), throttle_streak: 1, updated_at: new Date() })
    await page.goto(`${f.stack.web.url}/platform-admin/`)
    await page.evaluate(() => sessionStorage.clear())
    await page.reload()
    await signInThroughTheForm(page, staff)

    await page.waitForSelector('#event-count-rows tr:has-text("bounced")')
    await page.fill('#search-form input[name=destination]', alice)
    await page.click('#search-form button[type=submit]')
    await page.waitForSelector(`#search-rows tr[data-message-id="${dead.messageId}"]`)
    const found = (await page.textContent('#search-rows'))!
    expect(found).to.include('dead_lettered').and.include('worker_crash_loop').and.include('ses')
    expect(found).to.not.include(alice.split('@')[0]!)
    await shot('12-search-by-destination')

    await page.selectOption('#redrive-form select[name=reason]', 'worker_crash_loop')
    await page.click('#redrive-form button[type=submit]')
    await page.click('#send-step-up')
    await page.fill('#step-up-form input[name=code]', await codeFor(staff, 2))
    await page.click('#step-up-form button[type=submit]')
    await page.waitForSelector('#notice:has-text("Redrive of worker_crash_loop: 1 of 1 reissued")')
    expect(await f.db.owner('outbox.security_outbox_messages').where({ challenge_id: dead.challengeId })).to.have.length(2)

    // The step-up still holds: the pause lifts at once.
    await page.click('#lift-pause-whatsapp')
    await page.waitForSelector('#notice:has-text("Pause of whatsapp lifted")')
    await page.waitForSelector('#pauses:has-text("none")')
    expect(await f.db.owner('platform.audit_records').where({ action: 'security_outbox.channel_pause_lifted' })).to.have.length(1)
    await shot('13-pause-lifted')
    await page.click('#sign-out')
    expect(problems).to.deep.equal([])
  })

  it('shows the webhook endpoints with their dead-lettered deliveries, and redrives them after a step-up', async () => {
    const { page, shot } = browser
    const staff = uniqueEmail('operator')
    await account(staff)
    expect(await changeStaff(f.db.owner, 'grant', parseIdentifier(staff)!, 'test', new Date())).to.equal('granted')
    // An endpoint whose one delivery died (as a 400 from the receiver would leave it).
    const endpointId = crypto.randomUUID()
    await f.db.owner('platform.webhook_endpoints').insert({
      id: endpointId,
      url: 'https://hooks.sealpost.invalid/sealpost',
      events: ['identity.created'],
      secret_envelope: 'v2.0.sealed',
      created_at: new Date(),
      created_by: crypto.randomUUID(),
    })
    const [event] = await f.db
      .owner('platform.events')
      .insert({ type: 'identity.created', payload: { identityId: crypto.randomUUID() } })
      .returning('id')
    await f.db.owner('platform.webhook_deliveries').insert({
      event_id: event.id,
      endpoint_id: endpointId,
      next_attempt_at: new Date(),
      state: 'dead_lettered',
      attempt_count: 1,
      last_status_code: 400,
      last_failure: 'rejected',
      finished_at: new Date(),
    })
    await page.goto(`${f.stack.web.url}/platform-admin/`)
    await page.evaluate(() => sessionStorage.clear())
    await page.reload()
    await signInThroughTheForm(page, staff)
    await page.waitForSelector('#webhooks:not([hidden]) #webhook-rows tr')
    expect(await page.textContent('#webhook-rows'))
      .to.include('https://hooks.sealpost.invalid/sealpost')
      .and.include('identity.created')
    await shot('12-webhook-endpoints')
    await page.click('#webhook-rows button')
    await page.click('#send-step-up')
    await page.fill('#step-up-form input[name=code]', await codeFor(staff, 2))
    await page.click('#step-up-form button[type=submit]')
    await page.waitForSelector('#notice:has-text("1 deliveries redriven")')
    // Audited; the stack's worker then tries it again at once (and refuses the unresolvable host).
    const audit = await f.db.owner('platform.audit_records').where({ action: 'webhook_endpoint.redriven', subject: endpointId })
    expect(audit.map((record) => record.details)).to.deep.equal([{ deliveries: 1 }])
    // The test's endpoint must not be delivered to by the stack's worker.
    await f.db.owner('platform.webhook_endpoints').where({ id: endpointId }).update({ disabled_at: new Date() })
    await page.click('#sign-out')
  })

  it('shows the suppression panel when the server answers its route, and lifts one after a step-up', async () => {
    const { page, shot, problems } = browser
    const staff = uniqueEmail('operator')
    await account(staff)
    expect(await changeStaff(f.db.owner, 'grant', parseIdentifier(staff)!, 'test', new Date())).to.equal('granted')
    // A real suppression (as a permanent bounce would leave it), lifted through the real routes.
    const id = uuidv7()
    await f.db.owner('outbox.suppressed_destinations').insert({
      id,
      destination_hmac: randomBytes(32),
      channel: 'email',
      masked_destination: 'b•••e@e•••.com',
      reason: 'permanent_bounce',
      since: new Date(),
    })
    await page.goto(`${f.stack.web.url}/platform-admin/`)
    await page.evaluate(() => sessionStorage.clear())
    await page.reload()
    await signInThroughTheForm(page, staff)
    await page.waitForSelector('#suppressions:not([hidden]) #suppression-rows tr')
    expect(await page.textContent('#suppression-rows'))
      .to.include('b•••e@e•••.com')
      .and.include('bounce')
    await page.click('#suppression-rows button')
    await page.click('#send-step-up')
    await page.fill('#step-up-form input[name=code]', await codeFor(staff, 2))
    await shot('10-suppression-step-up')
    await page.click('#step-up-form button[type=submit]')
    await page.waitForSelector('#notice:has-text("Suppression lifted")')
    await page.waitForSelector('#suppressions-empty:not([hidden])')
    expect(await f.db.owner('outbox.suppressed_destinations').where({ id }), 'lifted in the database').to.have.length(0)
    expect(await f.db.owner('platform.audit_records').where({ subject: id }), 'and audited').to.have.length(1)
    await shot('11-suppression-lifted')
    await page.click('#sign-out')
    expect(problems).to.deep.equal([])
  })

  it('lists API keys, creates one after a step-up showing it once, and revokes it', async () => {
    const { page, shot, problems } = browser
    const staff = uniqueEmail('operator')
    await account(staff)
    expect(await changeStaff(f.db.owner, 'grant', parseIdentifier(staff)!, 'test', new Date())).to.equal('granted')
    await page.goto(`${f.stack.web.url}/platform-admin/`)
    await page.evaluate(() => sessionStorage.clear())
    await page.reload()
    await signInThroughTheForm(page, staff)
    await page.waitForSelector('#api-keys:not([hidden])')
    await page.waitForSelector('#send-caps:not([hidden])')
    await page.fill('#api-key-form input[name=name]', 'Acme auth')
    await page.fill('#api-key-form input[name=linkOrigins]', 'https://auth.acme.example')
    await page.click('#api-key-form button[type=submit]')
    await page.click('#send-step-up')
    await page.fill('#step-up-form input[name=code]', await codeFor(staff, 2))
    await page.click('#step-up-form button[type=submit]')
    await page.waitForSelector('#api-key-created:not([hidden])')
    const key = (await page.textContent('#api-key-value'))!
    expect(key).to.match(/^sp_live_[0-9a-f]{32}_[A-Za-z0-9_-]{43}$/)
    expect(await page.textContent('#api-key-rows'))
      .to.include('Acme auth')
      .and.include('verification_code, magic_link · email')
      .and.include('1000 sends · 100 new addresses')
      .and.include('https://auth.acme.example')
    await shot('12-api-key-created')
    const send = () =>
      f.stack.call(
        'POST',
        '/v1/messages',
        {
          purpose: 'verification_code',
          channel: 'email',
          destination: uniqueEmail('app-user'),
          secret: { code: '482913' },
          expiresAt: new Date(Date.now() + 600_000).toISOString(),
        },
        { authorization: `Bearer ${key}`, 'idempotency-key': crypto.randomUUID() },
      )
    expect((await send()).status, 'the key works').to.equal(202)
    await page.click('#api-key-rows button')
    await page.waitForSelector('#notice:has-text("API key revoked")')
    expect(await page.textContent('#api-key-rows')).to.include('revoked')
    expect(await page.isHidden('#api-key-created'), 'the key is no longer shown').to.equal(true)
    expect((await send()).status, 'the revoked key is refused').to.equal(401)
    await page.click('#sign-out')
    expect(problems).to.deep.equal([])
  })

  it('reads the audit trail: newest first, filtered by action, older pages on demand, an empty filter said so', async () => {
    const { page, shot, problems } = browser
    const staff = uniqueEmail('auditor')
    await account(staff)
    expect(await changeStaff(f.db.owner, 'grant', parseIdentifier(staff)!, 'test', new Date())).to.equal('granted')
    const base = Date.now() - 3_600_000
    await f.db.owner('platform.audit_records').insert(
      Array.from({ length: 25 }, (_, i) => ({
        id: uuidv7(),
        at: new Date(base + i * 1_000),
        actor: 'cli:browsed',
        action: 'test.browsed',
        subject: `subject-${i}`,
        details: { n: i },
      })),
    )
    await page.goto(`${f.stack.web.url}/platform-admin/`)
    await page.evaluate(() => sessionStorage.clear())
    await page.reload()
    await signInThroughTheForm(page, staff)
    await page.waitForSelector('#audit-rows tr')
    expect(await page.textContent('#audit-rows')).to.include('staff.grant')
    await page.fill('#audit-form input[name=action]', 'test.browsed')
    await page.click('#audit-form button[type=submit]')
    // The unfiltered first page may hold 20 rows already: wait for the filtered one to replace it.
    await page.locator('#audit-rows tr', { hasText: 'test.browsed' }).nth(19).waitFor()
    expect(await page.locator('#audit-rows tr').count()).to.equal(20)
    expect(await page.textContent('#audit-rows tr:first-child'))
      .to.include('subject-24')
      .and.include('{"n":24}')
    await shot('13-audit-trail')
    await page.click('#more-audit')
    await page.waitForSelector('#audit-rows tr:nth-child(25)')
    expect(await page.textContent('#audit-rows tr:last-child')).to.include('subject-0')
    expect(await page.isVisible('#more-audit')).to.equal(false)
    await page.fill('#audit-form input[name=actor]', 'cli:nobody')
    await page.click('#audit-form button[type=submit]')
    await page.waitForSelector('#audit-empty:not([hidden])')
    await page.click('#sign-out')
    expect(problems).to.deep.equal([])
  })

  it('renders the API reference at /docs/ from the local Swagger UI package', async () => {
    const { page, shot, problems } = browser
    const answer = await page.goto(`${f.stack.web.url}/docs/`)
    expect(answer!.headers()['content-security-policy']).to.include("script-src 'self'")
    await page.waitForSelector('.opblock')
    const documented = Object.values((await f.stack.call('GET', '/openapi.json')).body!.paths as Record<string, object>).reduce(
      (n, item) => n + Object.keys(item).length,
      0,
    )
    expect(await page.locator('.opblock').count()).to.equal(documented)
    expect(await page.textContent('body')).to.include('/platform-admin/security-outbox/dead-letters/{messageId}/reissues')
    await shot('09-api-docs')
    expect(problems).to.deep.equal([])
  })
})
