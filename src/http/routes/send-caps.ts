import type { Router } from 'express'
import type { Knex } from 'knex'
import { z } from 'zod'
import { CAP_KINDS } from '../../outbox/send-caps.ts'
import { sendCapReport } from '../../platform/send-cap-report.ts'
import { requireSession, requireStaff } from '../auth.ts'
import { apiRegistry, apiRouter, route } from '../openapi/registry.ts'

const asked = z.enum(['owner', 'stranger', 'courier']).meta({
  description:
    'Who asked: `owner` (what only the owner of the account asks for: a recovery to its verified identifier, step-up, notices; counted, never held), `stranger` (what a pump can aim anywhere), `courier` (an API key or hook)',
})

export const SendCapReport = z.object({
  windowStart: z.iso.datetime().meta({ description: 'The clock hour the counters count' }),
  scopes: z.array(
    z.object({
      channel: z.string(),
      kind: z.enum(CAP_KINDS),
      scope: z.string().meta({ description: "'' for the channel, a calling code, or a prefix's first four digits (the fullest of them)" }),
      asked,
      sent: z.int(),
      cap: z.int().nullable().meta({ description: 'The hourly cap of this class (null: counted by a previous release)' }),
    }),
  ),
  conversionSince: z.iso.datetime(),
  conversion: z.array(
    z.object({
      channel: z.string(),
      prefix: z.string().nullable().meta({ description: 'The first four digits of the numbers (`4477•••`); null for the whole channel' }),
      sent: z.int().meta({ description: 'Codes published since conversionSince' }),
      confirmed: z.int().meta({ description: 'Of them, the ones a person typed in' }),
      ratio: z.number().nullable(),
    }),
  ),
})

/** The API document's description of each route below, in the same order. */
export const sendCapApi = apiRegistry(
  'Send caps',
  "The fleet's send caps this hour by who asked, and whether the codes sent reached people",
)
const api = {
  report: sendCapApi.add({
    operationId: 'getSendCaps',
    method: 'get',
    path: '/platform-admin/security-outbox/send-caps',
    auth: 'staff',
    summary:
      "This hour's send cap use per scope and who asked (owner, stranger, courier), and the last hour's conversion per channel and prefix",
    description:
      'Prefixes are cut to four digits, as the log lines show them: never a number (docs/operations.md "Runbook: a send cap is reached").',
    success: { status: 200, description: 'The report', body: SendCapReport },
  }),
}

/** The staff view of the send caps (docs/security.md "Caps from the owner's side"). */
export function sendCapRoutes({ db, clock }: { db: Knex; clock: () => Date }): Router {
  const router = apiRouter()
  route(router, api.report, requireSession(db, clock), requireStaff(db), async (_req, res) => {
    res.json(await sendCapReport(db, clock()))
  })
  return router
}
