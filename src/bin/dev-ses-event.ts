import { existsSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { ConfigError } from '../../config/schema.ts'
import { createKnex } from '../db/knex.ts'
import { latestProviderSend } from '../outbox/attempts-sql.ts'
import { DEV_TOPIC_ARN, devSnsSigner, sesEventMessage } from '../providers/ses/dev-sns-signer.ts'
import { runtimeFile } from '../runtime/dev-stack.ts'
import { main } from './main.ts'
import { ownerDatabaseUrl } from './owner-database.ts'

const KINDS = ['bounce', 'transient-bounce', 'complaint', 'delivery', 'reject', 'delay'] as const

/**
 * `npm run dev:ses-event -- bounce <messageId>`: signs an SES event for a published message with the
 * local SNS key `npm start` trusts (SNS_TEST_SIGNING_CERT) and posts it to POST /webhooks/ses.
 */
await main('cli', async (config) => {
  if (config.NODE_ENV === 'production' || config.NODE_ENV === 'staging') {
    throw new ConfigError([{ variable: 'NODE_ENV', problem: 'dev:ses-event is a development tool' }])
  }
  const [kind, messageId] = process.argv.slice(2) as [(typeof KINDS)[number] | undefined, string | undefined]
  if (!kind || !KINDS.includes(kind) || !messageId || !/^[0-9a-f-]{36}$/.test(messageId)) {
    console.error(`usage: npm run dev:ses-event -- <${KINDS.join('|')}> <messageId>`)
    process.exitCode = 2
    return
  }
  const file = runtimeFile(config.SEALPOST_DATA_DIR)
  const runtime = existsSync(file) ? (JSON.parse(await readFile(file, 'utf8')) as { apiUrl?: string; sesEventsTopicArn?: string }) : {}
  const apiUrl = runtime.apiUrl ?? `http://127.0.0.1:${config.PORT}`
  const db = createKnex(await ownerDatabaseUrl(config), { applicationName: 'sealpost-dev-ses-event', max: 1 })
  let sent: Awaited<ReturnType<typeof latestProviderSend>>
  try {
    sent = await latestProviderSend(db, messageId)
  } finally {
    await db.destroy()
  }
  if (!sent) {
    console.error('that message has no published attempt (is it sent yet?)')
    process.exitCode = 1
    return
  }
  const signer = await devSnsSigner(config.SEALPOST_DATA_DIR)
  const envelope = signer.envelope({
    Type: 'Notification',
    TopicArn: config.SES_EVENTS_TOPIC_ARN ?? runtime.sesEventsTopicArn ?? DEV_TOPIC_ARN,
    // Named as the recipient: a bounce or complaint suppresses only the address it names.
    Message: sesEventMessage(kind, sent.providerMessageId, new Date(), sent.destination),
  })
  const response = await fetch(`${apiUrl}/webhooks/ses`, {
    method: 'POST',
    headers: { 'content-type': 'text/plain; charset=UTF-8', 'x-amz-sns-message-type': 'Notification' },
    body: JSON.stringify(envelope),
  })
  console.log(`${response.status} ${await response.text()}`)
  if (!response.ok) process.exitCode = 1
})
