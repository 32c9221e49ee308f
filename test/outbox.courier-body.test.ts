import { expect } from 'chai'
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { decodeCourierBody, encodeCourierBody } from '../src/outbox/courier-body.ts'

/** The last commit whose courier body had no `otp`: its reader is what a worker of that build runs. */
const BEFORE_OTP = '1ba9c3846bc2e28a878311a92c577fec80f8e59a'

describe('the sealed body of a courier message', () => {
  const link = 'https://abcdefghijklmnopqrst.supabase.co/auth/v1/verify?token=pkce_7d5b7b&type=signup'

  it('carries a link with the code that does the same, and reads back both', () => {
    expect(decodeCourierBody(encodeCourierBody({ link, otp: '305805' }))).to.deep.equal({ link, otp: '305805' })
    expect(decodeCourierBody(encodeCourierBody({ link }))).to.deep.equal({ link })
    expect(decodeCourierBody(encodeCourierBody({ code: '305805' }))).to.deep.equal({ code: '305805' })
    // A code beside a code, or an otp that is not text, is no body of ours.
    expect(decodeCourierBody(Buffer.from(JSON.stringify({ code: '1', otp: '2' })))).to.equal(undefined)
    expect(decodeCourierBody(Buffer.from(JSON.stringify({ link, otp: 305805 })))).to.equal(undefined)
  })

  it('is read by a worker that predates `otp` as the link alone, which it still sends', async () => {
    const source = execFileSync('git', ['show', `${BEFORE_OTP}:src/outbox/courier-body.ts`], { stdio: ['ignore', 'pipe', 'pipe'] })
    const dir = mkdtempSync(path.join(tmpdir(), 'sealpost-courier-body-'))
    writeFileSync(path.join(dir, 'courier-body.ts'), source)
    const older = (await import(pathToFileURL(path.join(dir, 'courier-body.ts')).href)) as { decodeCourierBody: typeof decodeCourierBody }
    rmSync(dir, { recursive: true, force: true })
    expect(older.decodeCourierBody(encodeCourierBody({ link, otp: '305805' }))).to.deep.equal({ link })
  })
})
