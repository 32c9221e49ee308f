import { Router } from 'express'
import type { Knex } from 'knex'
import { z } from 'zod'
import { parseIdentifier } from '../../identity/identifiers.ts'
import { requestPasswordRecoveryTx, type ChallengeDeps } from '../../identity/password-recovery.ts'
import { HttpProblem } from '../problem.ts'

export const PasswordRecoveryRequest = z.strictObject({ identifier: z.string().min(1).max(320) })

/** POST /password-recoveries: always 202 with the same shape, known identifier or not (OX-S3). */
export function passwordRecoveryRoutes(db: Knex, deps: ChallengeDeps): Router {
  const router = Router()
  router.post('/password-recoveries', async (req, res) => {
    const body = PasswordRecoveryRequest.parse(req.body ?? {})
    const identifier = parseIdentifier(body.identifier)
    if (!identifier) throw new HttpProblem(422, 'invalid_identifier', 'The identifier must be an email address or an E.164 phone number.')
    const { challengeExpiresAt } = await db.transaction((trx) => requestPasswordRecoveryTx(trx, deps, identifier))
    res.status(202).json({ challengeExpiresAt: challengeExpiresAt.toISOString() })
  })
  return router
}
