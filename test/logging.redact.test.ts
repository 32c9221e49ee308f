import { expect } from 'chai'
import { describeError, redact } from '../src/logging/logger.ts'
import { capturingLogger } from './support/helpers.ts'

describe('log redaction', () => {
  it('redacts secret-bearing keys at any depth', () => {
    expect(
      redact({
        code: '123456',
        nested: { token: 't', password: 'p', Authorization: 'Bearer abc', envelope: 'v1.x', destination: 'a@b.co' },
        messageId: 'm-1',
      }),
    ).to.deep.equal({
      code: '[redacted]',
      nested: {
        token: '[redacted]',
        password: '[redacted]',
        Authorization: '[redacted]',
        envelope: '[redacted]',
        destination: '[redacted]',
      },
      messageId: 'm-1',
    })
  })

  it('masks email addresses and phone numbers inside free text', () => {
    expect(redact('sent to Alice@Example.com and +5491155554455 ok')).to.equal('sent to [redacted] and [redacted] ok')
  })

  it('reduces errors and buffers to something harmless', () => {
    expect(redact({ error: new Error('code 123456 for bob@example.com'), secret: Buffer.from('x') })).to.deep.equal({
      error: { errorName: 'Error' },
      secret: '[redacted]',
    })
  })

  it('writes a time as its ISO text and a bigint as its digits (a retry says when it is due)', () => {
    expect(redact({ nextAttemptAt: new Date('2026-12-01T09:00:05Z'), never: new Date(Number.NaN), rows: 12n })).to.deep.equal({
      nextAttemptAt: '2026-12-01T09:00:05.000Z',
      never: null,
      rows: '12',
    })
  })

  it('describes an error by name and code only', () => {
    const error = Object.assign(new Error('password authentication failed for bob@example.com'), { code: '28P01' })
    expect(describeError(error)).to.deep.equal({ errorName: 'Error', errorCode: '28P01' })
  })

  it('applies to every line the logger writes', () => {
    const logs = capturingLogger()
    logs.logger.info('sending to bob@example.com', { code: '654321', authorization: 'Bearer s3cr3t', messageId: 'm-2' })
    const line = logs.text()
    expect(line).to.include('m-2')
    for (const secret of ['bob@example.com', '654321', 's3cr3t']) expect(line).not.to.include(secret)
  })

  it('writes an Error logged on its own by its name and code, never its text', () => {
    const logs = capturingLogger()
    const error = Object.assign(new Error('password authentication failed: postgres://sealpost:s3cr3t-pw@db:5432/sealpost code 482913'), {
      code: '28P01',
    })
    logs.logger.error(error)
    const line = JSON.parse(logs.text()) as Record<string, unknown>
    expect(line).to.include({ level: 'error', errorName: 'Error', errorCode: '28P01' })
    for (const secret of ['s3cr3t-pw', '482913']) expect(JSON.stringify(line)).not.to.include(secret)
  })

  it('writes nothing for a function, whatever its toJSON says, at any depth', () => {
    const logs = capturingLogger()
    const leaky = () => ({ code: '482913' })
    logs.logger.info('x', { handler: Object.assign(() => undefined, { toJSON: () => 'otp 482913' }), row: { id: 'm-1', toJSON: leaky } })
    const line = JSON.parse(logs.text()) as Record<string, unknown>
    expect(line).to.include({ message: 'x' })
    expect(line.row).to.deep.equal({ id: 'm-1' })
    expect(JSON.stringify(line)).not.to.include('482913')
  })

  it('writes one JSON object a line: its time, level and message, then the fields, a logged time readable', () => {
    const logs = capturingLogger()
    const before = Date.now()
    logs.logger.warn('retry for +5491155554455', { messageId: 'm-3', nextAttemptAt: new Date('2026-12-01T09:00:05Z'), timestamp: 'forged' })
    logs.logger.info('second')
    const lines = logs
      .text()
      .trimEnd()
      .split('\n')
      .map((text) => JSON.parse(text) as Record<string, unknown>)
    expect(lines).to.have.length(2)
    expect(Object.keys(lines[0]!).slice(0, 3)).to.deep.equal(['timestamp', 'level', 'message'])
    expect(lines[0]).to.include({
      level: 'warn',
      message: 'retry for [redacted]',
      messageId: 'm-3',
      nextAttemptAt: '2026-12-01T09:00:05.000Z',
    })
    expect(Date.parse(lines[0]!.timestamp as string)).to.be.within(before, Date.now())
    expect(lines[1]).to.include({ level: 'info', message: 'second' })
  })
})
