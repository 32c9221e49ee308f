import { randomBytes } from 'node:crypto'
import { expect } from 'chai'
import { uniqueEmail } from './support/helpers.ts'
import { useWebStack } from './support/web-stack.ts'

const HISTOGRAM = 'sealpost_http_request_duration_seconds'

describe('HTTP latency histograms (sealpost_http_request_duration_seconds)', () => {
  const f = useWebStack({ worker: false })
  const scrape = async () => await (await fetch(`${f.stack.web.url}/metrics`)).text()
  const seriesOf = (text: string) => text.split('\n').filter((line) => line.startsWith(`${HISTOGRAM}_count{`))

  it('records a known route under its template, its method and its status class', async () => {
    expect(
      (await f.stack.call('POST', '/sign-ups', { identifier: uniqueEmail('latency'), password: 'correct horse battery' })).status,
    ).to.equal(202)
    const text = await scrape()
    expect(text).to.include(`# TYPE ${HISTOGRAM} histogram`)
    expect(text).to.match(new RegExp(`^${HISTOGRAM}_count\\{method="POST",route="/sign-ups",status_class="2xx"\\} 1$`, 'm'))
    expect(text).to.match(new RegExp(`^${HISTOGRAM}_bucket\\{le="\\+Inf",method="POST",route="/sign-ups",status_class="2xx"\\} 1$`, 'm'))
  })

  it('a stranger requesting 200 random paths and methods adds no label value: all of them are `unmatched`', async () => {
    const before = seriesOf(await scrape()).length
    for (let i = 0; i < 200; i += 1) {
      const path = `/${randomBytes(6).toString('hex')}/${randomBytes(4).toString('hex')}?q=${i}`
      const response = await fetch(`${f.stack.web.url}${path}`, { method: i % 2 === 0 ? 'GET' : 'POST' })
      expect(response.status).to.be.within(400, 499)
    }
    // A path with a parameter in it records its template, not the value the caller chose.
    await fetch(`${f.stack.web.url}/organizations/${randomBytes(8).toString('hex')}/invitations`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    })
    const text = await scrape()
    const series = seriesOf(text)
    expect(series.length - before, series.join('\n')).to.be.at.most(4)
    for (const line of series) expect(line).not.to.match(/[0-9a-f]{8}/)
    expect(text).to.match(new RegExp(`^${HISTOGRAM}_count\\{method="GET",route="unmatched",status_class="4xx"\\} \\d+$`, 'm'))
    expect(text).to.match(
      new RegExp(`^${HISTOGRAM}_count\\{method="POST",route="/organizations/:id/invitations",status_class="4xx"\\} 1$`, 'm'),
    )
  })
})
