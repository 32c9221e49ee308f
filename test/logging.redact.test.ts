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
})
