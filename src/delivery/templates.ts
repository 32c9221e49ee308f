import { readFileSync } from 'node:fs'
import path from 'node:path'
import Handlebars from 'handlebars'
import { IntlMessageFormat } from 'intl-messageformat'
import { CHANNELS, type Channel, type Purpose } from '../outbox/constants.ts'
import { SECURITY_EVENTS } from '../identity/security-notices.ts'
import { codeRenderings } from './code-renderings.ts'
import { isLocale, LOCALES, type Locale } from './locales.ts'
import { plainText } from './plain-text.ts'
import { TemplateError } from './template-error.ts'

export { TemplateError }

/** Every purpose a template exists for: the outbox's, plus the lead's `security_notice` (TEAM contract). */
export const TEMPLATE_PURPOSES = Object.freeze([
  'sign_up',
  'add_sign_in_method',
  'password_recovery',
  'step_up',
  'invitation',
  'security_notice',
  'verification_code',
  'magic_link',
] as const)
// Purpose is named although every one is listed above today: a purpose added to the outbox is a template purpose at once.
// eslint-disable-next-line @typescript-eslint/no-duplicate-type-constituents
export type TemplatePurpose = Purpose | (typeof TEMPLATE_PURPOSES)[number]

/**
 * Deployment-wide text: PRODUCT_NAME, SUPPORT_URL (shown as plain text), DEFAULT_LOCALE, and
 * OTP_ORIGIN_DOMAIN (the host an SMS code's origin-bound last line names; unset = no such line).
 */
export type Branding = { productName: string; supportUrl?: string; defaultLocale: Locale; otpOriginDomain?: string }

/** What one message needs rendered; which fields a purpose uses is up to its templates. */
export type MessageValues = {
  code?: string
  link?: string
  organizationName?: string
  notice?: { event: string; at: Date; identifier: string }
  /** A courier caller's display name for its product (checked like an organization name); else PRODUCT_NAME. */
  appName?: string
  expiresAt: Date
  now: Date
}

/** A rendered message: the subject and text always; HTML for email. */
export type Rendered = { subject: string; text: string; html?: string }

export const TEMPLATES_DIR = path.join(import.meta.dirname, '..', '..', 'templates')

const expiryMinutes = (remainingMs: number) => Math.max(1, Math.round(remainingMs / 60_000))
const expiryDays = (remainingMs: number) => Math.max(1, Math.round(remainingMs / 86_400_000))

/** The purposes whose secret is a one-time code, the only value of theirs that differs between people. */
const CODE_PURPOSES: ReadonlySet<TemplatePurpose> = new Set([
  'sign_up',
  'add_sign_in_method',
  'password_recovery',
  'step_up',
  'verification_code',
])

type Compiled = (context: Record<string, unknown>) => string

/** A template's text and, for email, HTML, each a function of the values. */
type CompiledTemplates = Map<string, { text: Compiled; html?: Compiled }>
type Translate = (locale: Locale, key: string, values: Record<string, unknown>) => string

/**
 * Every template of `dir` compiled (`<locale>/<purpose>.<channel>`), and its catalogs' ICU
 * MessageFormat `t` helper. HTML is compiled with Handlebars' escaping on; text and WhatsApp
 * without (their values go through `plainText` instead).
 */
function compileTemplates(dir: string): { compiled: CompiledTemplates; translate: Translate } {
  const catalogs = Object.fromEntries(
    LOCALES.map((locale) => [
      locale,
      JSON.parse(readFileSync(path.join(dir, 'catalog', `${locale}.json`), 'utf8')) as Record<string, string>,
    ]),
  )
  const formats = new Map<string, IntlMessageFormat>()
  const translate: Translate = (locale, key, values) => {
    const message = catalogs[locale]![key]
    if (message === undefined) throw new Error(`no message ${key} in the ${locale} catalog`)
    let format = formats.get(`${locale}:${key}`)
    if (!format) formats.set(`${locale}:${key}`, (format = new IntlMessageFormat(message, locale)))
    return String(format.format(values as Record<string, string | number>))
  }
  const environment = (escapeHtml: boolean) => {
    const env = Handlebars.create()
    env.registerHelper('t', function (this: unknown, key: string, options: Handlebars.HelperOptions) {
      const root = options.data.root as Record<string, unknown>
      return translate(root.locale as Locale, key, { ...root, ...options.hash })
    })
    const partial = escapeHtml ? 'layout.html.hbs' : 'footer.txt.hbs'
    env.registerPartial(escapeHtml ? 'layout' : 'footer', readFileSync(path.join(dir, 'partials', partial), 'utf8'))
    return (file: string): Compiled => env.compile(readFileSync(path.join(dir, file), 'utf8'), { strict: true, noEscape: !escapeHtml })
  }
  const html = environment(true)
  const text = environment(false)
  const compiled: CompiledTemplates = new Map()
  for (const locale of LOCALES) {
    for (const purpose of TEMPLATE_PURPOSES) {
      compiled.set(`${locale}/${purpose}.email`, {
        text: text(`${locale}/${purpose}.email.txt.hbs`),
        html: html(`${locale}/${purpose}.email.html.hbs`),
      })
      for (const phone of ['whatsapp', 'sms'] as const)
        compiled.set(`${locale}/${purpose}.${phone}`, { text: text(`${locale}/${purpose}.${phone}.txt.hbs`) })
    }
  }
  return { compiled, translate }
}

type Render = (purpose: TemplatePurpose, channel: Channel, locale: Locale, values: MessageValues) => Rendered

/** Renders one message whole: every value made plain text (and escaped again in HTML), the subject from the catalog. */
function wholeRenderer(branding: Branding, { compiled, translate }: { compiled: CompiledTemplates; translate: Translate }): Render {
  // An SMS pays per segment: no trailing blank. A code's SMS ends with the origin-bound line
  // (WICG "Origin-bound one-time codes delivered via SMS": the LAST line, `@host #code`), so a
  // browser or phone offers the code only on that site; WhatsApp has its copy-code button instead.
  const originLine = branding.otpOriginDomain ? `@${branding.otpOriginDomain} #` : undefined
  function smsText(text: string, purpose: TemplatePurpose, code: string): string {
    const body = text.trimEnd()
    return originLine && CODE_PURPOSES.has(purpose) ? `${body}\n\n${originLine}${code}` : body
  }
  return (purpose, channel, locale, values) => {
    const templates = compiled.get(`${locale}/${purpose}.${channel}`)
    if (!templates) throw new Error(`no template for ${purpose} on ${channel}`)
    const remainingMs = values.expiresAt.getTime() - values.now.getTime()
    const raw = {
      locale,
      product: values.appName ?? branding.productName,
      supportUrl: branding.supportUrl ?? '',
      code: values.code ?? '',
      link: values.link ?? '',
      organizationName: values.organizationName ?? '',
      event: values.notice?.event ?? '',
      identifier: values.notice?.identifier ?? '',
      at: values.notice
        ? new Intl.DateTimeFormat(locale, { dateStyle: 'long', timeStyle: 'short', timeZone: 'UTC' }).format(values.notice.at)
        : '',
      // SMS: a fixed, short form in GSM-7 (Intl's may put a narrow no-break space before "AM",
      // which alone would turn the whole SMS into UCS-2 and halve what one segment holds).
      atUtc: values.notice ? values.notice.at.toISOString().slice(0, 16).replace('T', ' ') : '',
      minutes: expiryMinutes(remainingMs),
      days: expiryDays(remainingMs),
    }
    const safe = Object.fromEntries(Object.entries(raw).map(([key, value]) => [key, typeof value === 'string' ? plainText(value) : value]))
    const subject = translate(locale, `subject.${purpose}`, safe)
    const text = templates.text({ ...safe, subject })
    return {
      subject,
      text: channel === 'sms' ? smsText(text, purpose, safe.code as string) : text,
      // Handlebars escapes every value here (& < > " ' ` =) on top.
      ...(templates.html ? { html: templates.html({ ...safe, subject }) } : {}),
    }
  }
}

/**
 * Every template rendered now with sample values that take every branch a message can (each
 * notice event and the catalogs' fallback, one and several minutes or days): one that cannot
 * render (a missing value, an unknown catalog key) fails the process at start, naming itself,
 * not a message at its send; and the first message after a start is not the one that pays for
 * compiling them (Handlebars compiles lazily).
 */
function checkEveryTemplate(templates: Templates): void {
  for (const locale of LOCALES)
    for (const purpose of TEMPLATE_PURPOSES)
      for (const channel of CHANNELS)
        for (const values of checkValues(purpose)) {
          try {
            templates.render(purpose, channel, locale, values)
          } catch (error) {
            // Sample values only: the message names a template, a value or a catalog key, no secret.
            throw new TemplateError(`template ${locale}/${purpose}.${channel} cannot render: ${(error as Error).message}`)
          }
        }
}

/**
 * The templates of templates/ (Handlebars; one file per purpose × channel × locale, docs/delivery.md
 * "Message templates") with their ICU MessageFormat catalogs, compiled once and checked. HTML is
 * rendered with Handlebars' escaping on; text and WhatsApp with every value passed through
 * `plainText`. A missing file, a missing value or an unknown catalog key is an error, never a
 * blank. A code message reuses its rendering (src/delivery/code-renderings.ts) unless
 * `reuseCodeRenderings: false` (every message whole: the tests' reference).
 */
export function loadTemplates(branding: Branding, dir = TEMPLATES_DIR, options: { reuseCodeRenderings?: boolean } = {}): Templates {
  const reuse = options.reuseCodeRenderings ?? true
  const renderWhole = wholeRenderer(branding, compileTemplates(dir))
  const reused = codeRenderings()
  const templates: Templates = {
    render(purpose, channel, requestedLocale, values) {
      const locale: Locale = isLocale(requestedLocale) ? requestedLocale : branding.defaultLocale
      const { code } = values
      if (
        !reuse ||
        code === undefined ||
        !CODE_PURPOSES.has(purpose) ||
        values.link !== undefined ||
        values.organizationName !== undefined ||
        values.appName !== undefined ||
        values.notice
      )
        return renderWhole(purpose, channel, locale, values)
      const remainingMs = values.expiresAt.getTime() - values.now.getTime()
      const key = `${locale}/${purpose}.${channel}/${expiryMinutes(remainingMs)}/${expiryDays(remainingMs)}`
      return reused(key, code, (probe) => renderWhole(purpose, channel, locale, { ...values, code: probe }))
    },
  }
  checkEveryTemplate(templates)
  return templates
}

/** The load's check: the preview's sample in every variant a message can take. */
function checkValues(purpose: TemplatePurpose): MessageValues[] {
  const sample = sampleValues(purpose)
  // One minute (and one day), then seven days (10 080 minutes): the singular and plural forms.
  const expiries = [60_000, 7 * 86_400_000].map((ms) => new Date(SAMPLE_NOW.getTime() + ms))
  // An event the catalogs do not name takes their fallback branch.
  const events = sample.notice ? [...SECURITY_EVENTS, 'a_future_event'] : [undefined]
  // A link alone, and a link with the code that does the same (a Supabase hook's default).
  const codes = purpose === 'magic_link' ? [undefined, sample.code] : [sample.code]
  return expiries.flatMap((expiresAt) =>
    events.flatMap((event) =>
      codes.map((code) => ({ ...sample, expiresAt, code, ...(event && sample.notice ? { notice: { ...sample.notice, event } } : {}) })),
    ),
  )
}

const SAMPLE_NOW = new Date('2026-12-01T09:00:00Z')

/** Sample values per purpose (the load's check and `npm run preview`); the organization name is hostile on purpose, to show the escaping. */
export function sampleValues(purpose: TemplatePurpose): MessageValues {
  const expiresAt = new Date(
    SAMPLE_NOW.getTime() + (purpose === 'invitation' ? 7 * 86_400_000 : purpose === 'security_notice' ? 86_400_000 : 600_000),
  )
  if (purpose === 'invitation')
    return {
      now: SAMPLE_NOW,
      expiresAt,
      organizationName: 'Acme <b>Research</b> & "Sons"',
      link: 'https://app.sealpost.test/join#token=Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx5',
    }
  if (purpose === 'magic_link')
    return { now: SAMPLE_NOW, expiresAt, link: 'https://app.example.test/magic#token=Zm9vYmFyYmF6cXV4cXV1eGNvcmdl', code: '482913' }
  if (purpose === 'security_notice')
    return { now: SAMPLE_NOW, expiresAt, notice: { event: 'sign_in_method_added', at: SAMPLE_NOW, identifier: 'b•••b@e•••.com' } }
  return { now: SAMPLE_NOW, expiresAt, code: '482913' }
}

export type Templates = { render(purpose: TemplatePurpose, channel: Channel, locale: string, values: MessageValues): Rendered }
