import { Gauge, type Registry } from 'prom-client'
import type { SendCapReport } from '../platform/send-cap-report.ts'

/**
 * The web's gauges of the fleet's send caps (docs/operations.md "Is delivery healthy?"): this hour's
 * counters by who asked, and the last hour's codes and confirmations per channel and prefix. Labels
 * from closed or bounded sets: a calling code, a prefix's first four digits (the twenty that sent
 * the most), never a number.
 */
export function sendCapGauges(registry: Registry) {
  const labelNames = ['channel', 'scope_kind', 'scope', 'asked']
  const capSends = new Gauge({
    name: 'sealpost_send_cap_sends',
    help: "Sends counted this clock hour against a send cap, fleet-wide, by channel, kind, scope (a calling code, or a prefix's first four digits: the fullest) and who asked (owner, stranger, courier)",
    labelNames,
    registers: [registry],
  })
  const capLimit = new Gauge({
    name: 'sealpost_send_cap_limit',
    help: 'The hourly cap of each counter in sealpost_send_cap_sends (the share of its class)',
    labelNames,
    registers: [registry],
  })
  const codesSent = new Gauge({
    name: 'sealpost_codes_sent_last_hour',
    help: "Codes of the identity flows published in the last hour, by channel and, for the prefixes that sent the most, the numbers' first four digits ('' = the whole channel)",
    labelNames: ['channel', 'prefix'],
    registers: [registry],
  })
  const codesConfirmed = new Gauge({
    name: 'sealpost_codes_confirmed_last_hour',
    help: 'Of sealpost_codes_sent_last_hour, the codes a person typed in: a prefix that sends many and confirms none is a pump',
    labelNames: ['channel', 'prefix'],
    registers: [registry],
  })
  return {
    /** One scrape's reading: each names this hour's counters and prefixes afresh, so last hour's series do not linger. */
    update(report: SendCapReport) {
      for (const gauge of [capSends, capLimit, codesSent, codesConfirmed]) gauge.reset()
      for (const { channel, kind, scope, asked, sent, cap } of report.scopes) {
        const labels = { channel, scope_kind: kind, scope: kind === 'prefix' ? `${scope}•••` : scope, asked }
        capSends.set(labels, sent)
        if (cap !== null) capLimit.set(labels, cap)
      }
      for (const { channel, prefix, sent, confirmed } of report.conversion) {
        codesSent.set({ channel, prefix: prefix ?? '' }, sent)
        codesConfirmed.set({ channel, prefix: prefix ?? '' }, confirmed)
      }
    },
  }
}
