// Sealpost operator console: a static page over the staff JSON routes. The session token lives in
// this tab's sessionStorage and travels in the Authorization header (never a cookie, so no CSRF);
// every value from the server is written with textContent, never parsed as HTML.
'use strict'

const BASE = '/platform-admin/security-outbox'
const store = {
  get: (key) => JSON.parse(sessionStorage.getItem(`sealpost.${key}`) ?? 'null'),
  set: (key, value) => sessionStorage.setItem(`sealpost.${key}`, JSON.stringify(value)),
  clear: () => ['session', 'who', 'elevation'].forEach((key) => sessionStorage.removeItem(`sealpost.${key}`)),
}
const $ = (id) => document.getElementById(id)
const show = (id, visible = true) => {
  $(id).hidden = !visible
}

const REFUSALS = {
  invalid_credentials: 'The identifier or the password is wrong.',
  not_staff: 'This account is not staff (npm run staff -- grant <identifier>).',
  invalid_code: 'That code is wrong or no longer valid.',
  elevation_required: 'A fresh step-up is needed.',
  own_message: 'You cannot reissue a message of your own account.',
  newer_message_exists: 'A newer code went to this destination since; reissuing would replace it.',
  challenge_expired: 'The code’s challenge has expired: the person must ask again.',
  challenge_consumed: 'The challenge was already used.',
  challenge_revoked: 'The challenge was revoked.',
  challenge_out_of_attempts: 'The challenge has no attempts left.',
  superseded_by_resend: 'This message was replaced by a resend.',
  invitation_message: 'Invitations are not reissued; the admin invites again.',
  provider_rejected: 'The provider rejected this destination; fix the cause before reissuing.',
  reissue_refused_provider_rejected: 'The provider rejected this destination; fix the cause before reissuing.',
  reissue_refused_decryption_failed:
    'Security: this message’s envelope did not open (tampering or a lost key). Nothing was sent; report it, do not reissue.',
  reissue_destination_mismatch:
    'Security: this message is not addressed to its challenge’s own identifier; the row was altered. Nothing was sent; report it.',
  destination_suppressed:
    'The destination is suppressed (a bounce or complaint): a new code would die unsent. Lift its suppression (Suppressions panel) first, once the address works again.',
  too_many_requests: 'Too many requests; wait a moment.',
  message_not_found: 'There is no message with that id.',
  invalid_destination: 'Type an exact email address or a phone number in E.164 (+491701234567).',
  pause_not_found: 'That channel is not paused (any more).',
  hold_not_found: 'That provider is not held down (any more).',
  rate_limited: 'Too many codes; wait a moment.',
  resend_too_soon: 'A code was sent moments ago; wait before asking again.',
}
// The known text, then the problem's own code, so the operator can name the refusal when reporting it.
const explain = (problem) =>
  (problem &&
    (REFUSALS[problem.code]
      ? `${REFUSALS[problem.code]} (${problem.code})`
      : `Refused: ${problem.title ?? ''} (${problem.code ?? 'unknown error'})`)) ||
  'The server did not answer.'
const when = (iso) => (iso ? `${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC` : '—')

function notify(text, isError = false) {
  const notice = $('notice')
  notice.textContent = text
  notice.classList.toggle('error', isError)
  notice.hidden = false
  notice.scrollIntoView({ block: 'nearest' })
}

/** One JSON call with the session; 401 and not_staff end the session here, other answers go back. */
async function api(method, path, { body, headers = {} } = {}) {
  const session = store.get('session')
  const response = await fetch(path, {
    method,
    headers: {
      ...(session ? { Authorization: `Bearer ${session}` } : {}),
      ...(body ? { 'Content-Type': 'application/json' } : {}),
      ...headers,
    },
    body: body ? JSON.stringify(body) : undefined,
  })
  const text = await response.text()
  const answer = { status: response.status, body: text ? JSON.parse(text) : undefined }
  if (session && response.status === 401) {
    endSession('Your session ended; sign in again.')
    throw answer
  }
  if (response.status === 403 && answer.body?.code === 'not_staff') {
    await signOut(explain(answer.body))
    throw answer
  }
  return answer
}

function cell(row, text, className) {
  const td = document.createElement('td')
  td.textContent = text
  if (className) td.className = className
  row.append(td)
  return td
}
function tag(text, kind) {
  const span = document.createElement('span')
  span.className = kind ? `tag ${kind}` : 'tag'
  span.textContent = text
  return span
}
function facts(dl, entries) {
  dl.replaceChildren(
    ...entries.flatMap(([name, value]) => {
      const dt = document.createElement('dt')
      dt.textContent = name
      const dd = document.createElement('dd')
      if (value instanceof Node) dd.append(value)
      else dd.textContent = String(value)
      return [dt, dd]
    }),
  )
}

async function loadBacklog() {
  const { status, body } = await api('GET', `${BASE}/backlog`)
  if (status !== 200) return notify(explain(body), true)
  facts(
    $('states'),
    Object.entries(body.states).map(([state, n]) => [state.replace('_', ' '), n]),
  )
  facts($('queue'), Object.entries(body.queue))
  const reasons = Object.entries(body.deadLettersLast24h).filter(([, n]) => n > 0)
  facts($('reasons'), reasons.length ? reasons : [['none', 0]])
  $('oldest').textContent = body.oldestDuePendingAgeSeconds === null ? 'none due' : `${body.oldestDuePendingAgeSeconds} s`
  // Each provider's outage hold: up, held down, or probing whether it is back.
  const providers = Array.isArray(body.providers) ? body.providers : []
  facts(
    $('providers'),
    providers.length
      ? providers.map((p) => {
          const state = tag(p.state === 'down' ? 'held down' : p.state, p.state === 'up' ? 'good' : 'bad')
          if (p.state === 'up') return [`${p.provider} (${p.channel})`, state]
          const box = document.createElement('span')
          box.append(
            state,
            ' ',
            button('Lift hold', () => liftHold(p.provider), `lift-hold-${p.provider}`),
          )
          return [`${p.provider} (${p.channel})`, box]
        })
      : [['none yet', '—']],
  )
  await loadPauses()
}

function button(text, onClick, id) {
  const b = document.createElement('button')
  b.type = 'button'
  b.className = 'small'
  b.textContent = text
  if (id) b.id = id
  b.addEventListener('click', onClick)
  return b
}

// Throttle pauses per provider (or a whole channel's, from a worker of the previous release); a lift ends every pause of its channel (step-up).
async function loadPauses() {
  const { status, body } = await api('GET', `${BASE}/pauses`)
  if (status !== 200) return facts($('pauses'), [['unknown', '—']])
  facts(
    $('pauses'),
    body.items.length
      ? body.items.map((p) => {
          const box = document.createElement('span')
          box.append(
            `until ${when(p.pausedUntil)} `,
            button('Lift pause', () => liftPause(p.channel), `lift-pause-${p.provider ?? p.channel}`),
          )
          return [p.provider ? `${p.provider} (${p.channel})` : p.channel, box]
        })
      : [['none', '—']],
  )
}

/** Lifting a pause or a hold: one intent, a step-up first; the answer says how many held messages went out. */
function liftControl(path, why, done) {
  const attempt = () =>
    withElevation(why, async (elevationToken) => {
      const { status, body } = await api('DELETE', path, { headers: { 'X-Elevation-Token': elevationToken } })
      if (status === 403 && body?.code === 'elevation_required') {
        store.set('elevation', null)
        return attempt()
      }
      if (status !== 200) return notify(explain(body), true)
      await loadBacklog()
      notify(`${done}; ${body.released} held message(s) called back to go out now.`)
    })
  return attempt()
}
const liftPause = (channel) =>
  liftControl(
    `${BASE}/channels/${encodeURIComponent(channel)}/pause`,
    `Lifting the ${channel} pause sends its held messages at once, even if the provider still throttles; confirm with a step-up code first.`,
    `Pause of ${channel} lifted`,
  )
const liftHold = (provider) =>
  liftControl(
    `${BASE}/providers/${encodeURIComponent(provider)}/hold`,
    `Lifting the outage hold of ${provider} sends its channel's held messages to it at once; confirm with a step-up code first.`,
    `Hold of ${provider} lifted`,
  )

// Provider events over a window, per provider, channel and event.
async function loadEventCounts() {
  const hours = $('events-form').elements.hours.value
  const { status, body } = await api('GET', `${BASE}/delivery-events?hours=${encodeURIComponent(hours)}`)
  if (status !== 200) return notify(explain(body), true)
  $('event-count-rows').replaceChildren(
    ...body.counts.map((entry) => {
      const row = document.createElement('tr')
      cell(row, entry.provider)
      cell(row, entry.channel)
      cell(row, '').append(tag(entry.event, entry.event === 'delivered' ? 'good' : entry.event === 'delayed' ? '' : 'bad'))
      cell(row, String(entry.count), 'num')
      return row
    }),
  )
  show('event-counts-empty', body.counts.length === 0)
}

// Messages by destination: the address goes in a POST body, never in a URL; the answer is masked.
let search
async function findMessages(destination, before) {
  const { status, body } = await api('POST', `${BASE}/message-searches`, {
    body: { destination, limit: 20, ...(before ? { before } : {}) },
  })
  if (status !== 200) return notify(explain(body), true)
  search = { destination, endCursor: body.pageInfo.endCursor }
  const rows = body.items.map((item) => {
    const row = document.createElement('tr')
    row.dataset.messageId = item.messageId
    cell(row, when(item.createdAt))
    cell(row, item.purpose)
    cell(row, item.channel)
    cell(row, item.maskedDestination)
    cell(row, '').append(tag(item.state, item.state === 'published' ? 'good' : item.state === 'dead_lettered' ? 'bad' : ''))
    cell(row, String(item.attemptCount), 'num')
    cell(row, item.deadLetterReason ?? item.lastFailureClass ?? '—')
    cell(row, item.providers.length ? item.providers.join(' → ') : '—')
    cell(row, '').append(button('History', () => openMessage(item.messageId)))
    return row
  })
  if (before) $('search-rows').append(...rows)
  else $('search-rows').replaceChildren(...rows)
  show('search-table', $('search-rows').children.length > 0)
  show('search-empty', $('search-rows').children.length === 0)
  show('more-search', body.pageInfo.hasNextPage)
}

let page = { query: 'limit=10', info: undefined, number: 1 }
async function loadDeadLetters(query = page.query, number = page.number) {
  const { status, body } = await api('GET', `${BASE}/dead-letters?${query}`)
  if (status !== 200) return notify(explain(body), true)
  page = { query, info: body.pageInfo, number }
  $('dead-letter-rows').replaceChildren(
    ...body.items.map((item) => {
      const row = document.createElement('tr')
      row.dataset.messageId = item.messageId
      cell(row, when(item.deadLetteredAt))
      cell(row, item.purpose)
      cell(row, item.channel)
      cell(row, item.maskedDestination)
      cell(row, '').append(tag(item.reason, 'bad'))
      cell(row, item.lastFailureClass ?? '—')
      cell(row, String(item.attemptCount), 'num')
      const open = document.createElement('button')
      open.type = 'button'
      open.className = 'small'
      open.textContent = 'History'
      open.addEventListener('click', () => openMessage(item.messageId))
      cell(row, '').append(open)
      return row
    }),
  )
  show('dead-letters-empty', body.items.length === 0)
  $('newer').disabled = !body.pageInfo.hasPreviousPage
  $('older').disabled = !body.pageInfo.hasNextPage
  $('page-label').textContent = `page ${number}`
}

async function openMessage(messageId) {
  const { status, body } = await api('GET', `${BASE}/messages/${encodeURIComponent(messageId)}`)
  if (status !== 200) return notify(explain(body), true)
  const { message, attempts, deadLetter } = body
  $('message-id').textContent = message.messageId
  facts($('message-facts'), [
    ['state', tag(message.state, message.state === 'published' ? 'good' : message.state === 'dead_lettered' ? 'bad' : '')],
    ['purpose', message.purpose],
    ['channel', message.channel],
    ['destination', message.maskedDestination],
    ['locale', message.locale],
    ['created', when(message.createdAt)],
    ['published', when(message.publishedAt)],
    ['expires', when(message.expiresAt)],
    ['attempts', message.attemptCount],
  ])
  $('attempt-rows').replaceChildren(
    ...attempts.map((attempt) => {
      const row = document.createElement('tr')
      cell(row, String(attempt.attemptNo), 'num')
      cell(row, when(attempt.attemptedAt))
      // The path a phone code took: whatsapp_cloud · whatsapp, then twilio · sms.
      cell(row, attempt.channel ? `${attempt.provider ?? '—'} · ${attempt.channel}` : (attempt.provider ?? '—'))
      cell(row, '').append(tag(attempt.outcome, attempt.outcome === 'published' ? 'good' : 'bad'))
      cell(row, attempt.failureClass ?? '—')
      cell(row, when(attempt.retryAfterAt))
      cell(row, `${attempt.durationMs} ms`, 'num')
      cell(row, attempt.providerMessageId ?? '—', 'mono')
      return row
    }),
  )
  show('attempts-empty', attempts.length === 0)
  // Provider delivery events (bounces, complaints, deliveries) where the server records them.
  const events = Array.isArray(body.events) ? body.events : []
  $('event-rows').replaceChildren(
    ...events.map((event) => {
      const row = document.createElement('tr')
      cell(row, when(event.occurredAt))
      cell(row, event.event ?? '—')
      cell(row, event.subtype ?? '—')
      return row
    }),
  )
  show('events-box', events.length > 0)
  $('dead-letter-facts').textContent = deadLetter
    ? `${deadLetter.reason} at ${when(deadLetter.deadLetteredAt)}${deadLetter.lastFailureClass ? `, last failure ${deadLetter.lastFailureClass}` : ''}`
    : 'Not dead-lettered.'
  show('reissue-box', Boolean(deadLetter) && message.purpose !== 'invitation')
  $('reissue').onclick = () => reissue(message.messageId, crypto.randomUUID())
  for (const row of $('dead-letter-rows').children) row.classList.toggle('selected', row.dataset.messageId === message.messageId)
  show('message')
  $('message').scrollIntoView({ block: 'start' })
}

// Step-up: an action that needs X-Elevation-Token waits here until the operator has typed a code.
let pending
function withElevation(why, action) {
  const elevation = store.get('elevation')
  if (elevation && Date.parse(elevation.expiresAt) - Date.now() > 15_000) return action(elevation.token)
  pending = action
  $('step-up-why').textContent = why
  show('step-up-form', false)
  show('step-up')
  $('step-up').scrollIntoView({ block: 'start' })
  $('send-step-up').focus()
}
async function sendStepUp() {
  const { status, body } = await api('POST', '/step-ups', { body: {} })
  if (status !== 202) return notify(explain(body), true)
  notify(`A step-up code is on its way to your verified address (valid until ${when(body.challengeExpiresAt)}).`)
  show('step-up-form')
  $('step-up-form').elements.code.focus()
}
async function confirmStepUp(event) {
  event.preventDefault()
  const form = event.target
  const { status, body } = await api('POST', '/step-ups/confirmation', { body: { code: form.elements.code.value.trim() } })
  if (status !== 201) return notify(explain(body), true)
  form.reset()
  store.set('elevation', { token: body.elevationToken, expiresAt: body.expiresAt })
  show('step-up', false)
  const action = pending
  pending = undefined
  await action?.(body.elevationToken)
}

/** One reissue intent keeps its Idempotency-Key across step-up and retries, so it happens once. */
function reissue(messageId, idempotencyKey) {
  return withElevation('Reissuing sends a new code to the person; confirm with a step-up code first.', async (elevationToken) => {
    const { status, body } = await api('POST', `${BASE}/dead-letters/${encodeURIComponent(messageId)}/reissues`, {
      headers: { 'X-Elevation-Token': elevationToken, 'Idempotency-Key': idempotencyKey },
    })
    if (status === 403 && body?.code === 'elevation_required') {
      store.set('elevation', null)
      return reissue(messageId, idempotencyKey)
    }
    if (status !== 201) return notify(explain(body), true)
    await Promise.all([loadBacklog(), loadDeadLetters()])
    await openMessage(body.messageId)
    notify(`Reissued: new message ${body.messageId} (shown below); its code expires at ${when(body.challengeExpiresAt)}.`)
  })
}

/** A redrive of one reason: one Idempotency-Key per intent, kept across step-up; `after` goes on where the last one ended. */
let redriveNext
function redrive(reason, after, idempotencyKey = crypto.randomUUID()) {
  return withElevation(
    `Redriving sends a new code for each dead letter of ${reason} that can be reissued (at most 50); confirm with a step-up code first.`,
    async (elevationToken) => {
      const { status, body } = await api('POST', `${BASE}/dead-letters/redrives`, {
        body: { reason, ...(after ? { after } : {}) },
        headers: { 'X-Elevation-Token': elevationToken, 'Idempotency-Key': idempotencyKey },
      })
      if (status === 403 && body?.code === 'elevation_required') {
        store.set('elevation', null)
        return redrive(reason, after, idempotencyKey)
      }
      if (status !== 200) return notify(explain(body), true)
      redriveNext = body.hasMore ? { reason, after: body.endCursor } : undefined
      show('redrive-next', Boolean(redriveNext))
      const skipped = Object.entries(body.skipped).map(([code, n]) => `${n} ${code}`)
      notify(
        `Redrive of ${reason}: ${body.reissued} of ${body.considered} reissued` +
          (skipped.length ? `; skipped ${skipped.join(', ')}` : '') +
          (body.hasMore ? '. More remain.' : '.'),
      )
      await Promise.all([loadBacklog(), loadDeadLetters()])
    },
  )
}

// Suppressions: shown only when the server has the route.
let suppressionsAfter
async function loadSuppressions(more = false) {
  const query = more && suppressionsAfter ? `limit=20&after=${encodeURIComponent(suppressionsAfter)}` : 'limit=20'
  const { status, body } = await api('GET', `/platform-admin/suppressions?${query}`)
  if (status !== 200) return show('suppressions', false)
  const rows = body.items.map((item) => {
    const row = document.createElement('tr')
    cell(row, when(item.since))
    cell(row, item.channel ?? '—')
    cell(row, item.maskedDestination)
    cell(row, item.reason)
    const lift = document.createElement('button')
    lift.type = 'button'
    lift.className = 'small'
    lift.textContent = 'Lift'
    lift.addEventListener('click', () => liftSuppression(item.id))
    cell(row, '').append(lift)
    return row
  })
  if (more) $('suppression-rows').append(...rows)
  else $('suppression-rows').replaceChildren(...rows)
  suppressionsAfter = body.pageInfo?.endCursor
  show('more-suppressions', Boolean(body.pageInfo?.hasNextPage))
  show('suppressions-empty', $('suppression-rows').children.length === 0)
  show('suppressions')
}
function liftSuppression(id) {
  return withElevation(
    'Lifting a suppression lets messages go to that destination again; confirm with a step-up code first.',
    async (elevationToken) => {
      const { status, body } = await api('DELETE', `/platform-admin/suppressions/${encodeURIComponent(id)}`, {
        headers: { 'X-Elevation-Token': elevationToken },
      })
      if (status === 403 && body?.code === 'elevation_required') {
        store.set('elevation', null)
        return liftSuppression(id)
      }
      if (status !== 204) return notify(explain(body), true)
      notify('Suppression lifted.')
      await loadSuppressions()
    },
  )
}

// API keys of the courier API (docs/courier.md): shown only when the server has the route; the clear key only once.
async function loadApiKeys() {
  const { status, body } = await api('GET', '/platform-admin/api-keys')
  if (status !== 200) return show('api-keys', false)
  const rows = body.items.map((item) => {
    const row = document.createElement('tr')
    cell(row, when(item.createdAt))
    cell(row, item.name, 'text')
    cell(row, `${item.purposes.join(', ')} · ${item.channels.join(', ')}`, 'text')
    cell(row, `${item.sendsPerHour} sends · ${item.destinationsPerHour} new addresses`, 'text')
    cell(row, item.linkOrigins.length > 0 ? item.linkOrigins.join(', ') : '—', 'text')
    cell(row, item.lastUsedAt ? when(item.lastUsedAt) : '—')
    cell(row, item.revokedAt ? `revoked ${when(item.revokedAt)}` : 'live', 'text')
    const actions = cell(row, '')
    if (!item.revokedAt) {
      const revoke = document.createElement('button')
      revoke.type = 'button'
      revoke.className = 'small'
      revoke.textContent = 'Revoke'
      revoke.addEventListener('click', () => revokeApiKey(item.id))
      actions.append(revoke)
    }
    return row
  })
  $('api-key-rows').replaceChildren(...rows)
  show('api-keys-empty', rows.length === 0)
  show('api-keys')
}
function createApiKey(request) {
  return withElevation(
    'An API key lets an application send messages through Sealpost; confirm with a step-up code first.',
    async (elevationToken) => {
      const { status, body } = await api('POST', '/platform-admin/api-keys', {
        body: request,
        headers: { 'X-Elevation-Token': elevationToken },
      })
      if (status === 403 && body?.code === 'elevation_required') {
        store.set('elevation', null)
        return createApiKey(request)
      }
      if (status !== 201) return notify(explain(body), true)
      // The list first, then the notice: what the notice announces is on screen when it appears.
      await loadApiKeys()
      $('api-key-value').textContent = body.key
      show('api-key-created')
      notify('API key created: copy it now, it is not shown again.')
    },
  )
}
function revokeApiKey(id) {
  return withElevation('A revoked key stops working at once; confirm with a step-up code first.', async (elevationToken) => {
    const { status, body } = await api('DELETE', `/platform-admin/api-keys/${encodeURIComponent(id)}`, {
      headers: { 'X-Elevation-Token': elevationToken },
    })
    if (status === 403 && body?.code === 'elevation_required') {
      store.set('elevation', null)
      return revokeApiKey(id)
    }
    if (status !== 204) return notify(explain(body), true)
    show('api-key-created', false)
    await loadApiKeys()
    notify('API key revoked.')
  })
}

// The send caps this hour by who asked, and the last hour's conversion per prefix (docs/security.md "Caps from the owner's side").
async function loadSendCaps() {
  const { status, body } = await api('GET', '/platform-admin/security-outbox/send-caps')
  if (status !== 200) return show('send-caps', false)
  const rows = body.scopes.map((scope) => {
    const row = document.createElement('tr')
    for (const text of [scope.channel, scope.kind, scope.kind === 'prefix' ? `${scope.scope}•••` : scope.scope || '—', scope.asked])
      cell(row, text)
    cell(row, String(scope.sent))
    cell(row, scope.cap === null ? '?' : String(scope.cap))
    return row
  })
  $('send-cap-rows').replaceChildren(...rows)
  show('send-caps-empty', rows.length === 0)
  $('conversion-rows').replaceChildren(
    ...body.conversion.map((entry) => {
      const row = document.createElement('tr')
      cell(row, entry.channel)
      cell(row, entry.prefix ?? 'all')
      cell(row, String(entry.sent))
      cell(row, `${entry.confirmed} (${entry.ratio === null ? '—' : `${Math.round(entry.ratio * 100)} %`})`)
      return row
    }),
  )
  show('send-caps')
}

// Webhook endpoints: shown only when the server has the route; dead-lettered deliveries are redriven after a step-up.
async function loadWebhooks() {
  const { status, body } = await api('GET', '/platform-admin/webhook-endpoints')
  if (status !== 200) return show('webhooks', false)
  const rows = body.items.map((item) => {
    const row = document.createElement('tr')
    cell(row, item.url, 'text')
    cell(row, item.events.join(', '), 'text')
    cell(row, String(item.pendingDeliveries))
    cell(row, String(item.deadLetteredDeliveries))
    cell(row, item.disabledAt ? `disabled ${when(item.disabledAt)}` : 'enabled')
    const actions = cell(row, '')
    if (!item.disabledAt && item.deadLetteredDeliveries > 0) {
      const redrive = document.createElement('button')
      redrive.type = 'button'
      redrive.className = 'small'
      redrive.textContent = 'Redrive'
      redrive.addEventListener('click', () => redriveWebhooks(item.id))
      actions.append(redrive)
    }
    return row
  })
  $('webhook-rows').replaceChildren(...rows)
  show('webhooks-empty', rows.length === 0)
  show('webhooks')
}
function redriveWebhooks(id) {
  return withElevation(
    'Redriving sends the dead-lettered deliveries of this endpoint again (same webhook-id); confirm with a step-up code first.',
    async (elevationToken) => {
      const { status, body } = await api('POST', `/platform-admin/webhook-endpoints/${encodeURIComponent(id)}/redrives`, {
        headers: { 'X-Elevation-Token': elevationToken },
      })
      if (status === 403 && body?.code === 'elevation_required') {
        store.set('elevation', null)
        return redriveWebhooks(id)
      }
      if (status !== 200) return notify(explain(body), true)
      notify(`${body.redriven} deliveries redriven.`)
      await loadWebhooks()
    },
  )
}

// The audit trail: keyset pages, newest first, under the filters of the form (GET /platform-admin/audit-records).
let auditQuery = ''
let auditAfter
async function loadAudit(more = false) {
  if (!more) {
    const form = $('audit-form')
    const filters = ['action', 'actor', 'subject', 'from', 'to'].flatMap((name) => {
      const value = form.elements[name].value.trim()
      return value ? [[name, value]] : []
    })
    auditQuery = new URLSearchParams([['limit', '20'], ...filters]).toString()
  }
  const after = more && auditAfter ? `&after=${encodeURIComponent(auditAfter)}` : ''
  const { status, body } = await api('GET', `/platform-admin/audit-records?${auditQuery}${after}`)
  if (status !== 200) return notify(explain(body), true)
  const rows = body.items.map((item) => {
    const row = document.createElement('tr')
    cell(row, when(item.at))
    cell(row, item.action)
    cell(row, item.actor, 'mono')
    cell(row, item.subject ?? '—', 'mono')
    cell(row, Object.keys(item.details).length ? JSON.stringify(item.details) : '—', 'mono')
    return row
  })
  if (more) $('audit-rows').append(...rows)
  else $('audit-rows').replaceChildren(...rows)
  auditAfter = body.pageInfo.endCursor
  show('more-audit', body.pageInfo.hasNextPage)
  show('audit-empty', $('audit-rows').children.length === 0)
}

async function enter() {
  show('sign-in', false)
  $('who-text').textContent = `Signed in as ${store.get('who') ?? 'staff'}`
  show('who')
  try {
    await loadBacklog()
    show('console')
    await Promise.all([
      loadDeadLetters('limit=10', 1),
      loadSuppressions(),
      loadApiKeys(),
      loadEventCounts(),
      loadAudit(),
      loadWebhooks(),
      loadSendCaps(),
    ])
  } catch {
    // api() has already ended the session and said why.
  }
}
function endSession(text) {
  store.clear()
  show('console', false)
  show('message', false)
  $('search-rows').replaceChildren()
  show('search-table', false)
  // A created key never outlives the session that saw it.
  $('api-key-value').textContent = ''
  show('api-key-created', false)
  show('who', false)
  show('sign-in')
  if (text) notify(text, true)
}
async function signOut(text) {
  if (store.get('session'))
    await fetch('/sessions/current', { method: 'DELETE', headers: { Authorization: `Bearer ${store.get('session')}` } }).catch(
      () => undefined,
    )
  endSession(text)
  if (!text) notify('Signed out.')
}
async function signIn(event) {
  event.preventDefault()
  const form = event.target
  const identifier = form.elements.identifier.value.trim()
  const { status, body } = await api('POST', '/sessions', { body: { identifier, password: form.elements.password.value } })
  if (status !== 201) return notify(explain(body), true)
  form.reset()
  store.set('session', body.token)
  store.set('who', identifier)
  $('notice').hidden = true
  await enter()
}

document.addEventListener('DOMContentLoaded', () => {
  $('sign-in-form').addEventListener('submit', signIn)
  $('sign-out').addEventListener('click', () => signOut())
  $('refresh').addEventListener('click', () => Promise.all([loadBacklog(), loadDeadLetters()]))
  $('older').addEventListener('click', () => loadDeadLetters(`limit=10&after=${encodeURIComponent(page.info.endCursor)}`, page.number + 1))
  $('newer').addEventListener('click', () =>
    loadDeadLetters(`limit=10&before=${encodeURIComponent(page.info.startCursor)}`, page.number - 1),
  )
  $('open-form').addEventListener('submit', (event) => {
    event.preventDefault()
    openMessage(event.target.elements.messageId.value.trim())
  })
  $('close-message').addEventListener('click', () => show('message', false))
  $('send-step-up').addEventListener('click', sendStepUp)
  $('step-up-form').addEventListener('submit', confirmStepUp)
  $('cancel-step-up').addEventListener('click', () => {
    pending = undefined
    show('step-up', false)
  })
  $('more-suppressions').addEventListener('click', () => loadSuppressions(true))
  $('search-form').addEventListener('submit', (event) => {
    event.preventDefault()
    const destination = event.target.elements.destination.value.trim()
    event.target.reset()
    findMessages(destination)
  })
  $('more-search').addEventListener('click', () => findMessages(search.destination, search.endCursor))
  $('events-form').elements.hours.addEventListener('change', loadEventCounts)
  $('redrive-form').addEventListener('submit', (event) => {
    event.preventDefault()
    redrive(event.target.elements.reason.value)
  })
  $('redrive-next').addEventListener('click', () => redriveNext && redrive(redriveNext.reason, redriveNext.after))
  $('audit-form').addEventListener('submit', (event) => {
    event.preventDefault()
    loadAudit()
  })
  $('more-audit').addEventListener('click', () => loadAudit(true))
  $('api-key-form').addEventListener('submit', (event) => {
    event.preventDefault()
    const form = event.target
    const checked = (name) => [...form.elements[name]].filter((box) => box.checked).map((box) => box.value)
    const origins = form.elements.linkOrigins.value
      .split(',')
      .map((origin) => origin.trim())
      .filter((origin) => origin !== '')
    createApiKey({
      name: form.elements.name.value.trim(),
      purposes: checked('purposes'),
      channels: checked('channels'),
      linkOrigins: origins,
      sendsPerHour: Number(form.elements.sendsPerHour.value),
      destinationsPerHour: Number(form.elements.destinationsPerHour.value),
    })
  })
  if (store.get('session')) enter()
})
