import { checkOrganizationName } from '../organization/organization-name.ts'
import type { Channel } from '../outbox/constants.ts'
import { COURIER_ONLY_PURPOSES, decodeCourierBody } from '../outbox/courier-body.ts'
import { loadTemplates, type Branding, type Templates } from './templates.ts'
import { SealpostError } from '../errors/sealpost-error.ts'

/** The message row fields the content depends on. */
export type ComposableMessage = { id: string; purpose: string; channel: Channel; locale: string; expires_at: Date }

/** Thrown for a security notice whose sealed body is not the agreed JSON: structural, never retried. */
export class UnreadableBodyError extends SealpostError {
  override name = 'UnreadableBodyError'
}

/** What an invitation says instead of a stored organization name that fails the name rule. */
const UNNAMED_ORGANIZATION: Record<string, string> = { en: 'an organization', de: 'einer Organisation', es: 'una organización' }

/**
 * The subject, text and (email) HTML of one message from its opened secret: a one-time code, an
 * invitation token (made into `<base>/join#token=…`: the fragment never reaches a server or a
 * log), a security notice's JSON `{event, at, identifier}` (TEAM contract), or a courier
 * message's `{code}`/`{link, otp?}` (src/outbox/courier-body.ts). The caller wipes
 * the secret; no string copy outlives the rendering.
 */
export function composeMessage(
  templates: Templates,
  message: ComposableMessage,
  secret: Buffer,
  context: { organizationName?: string; invitationLinkBaseUrl?: string; now: Date },
): { subject: string; text: string; html?: string; code?: string } {
  const base = { expiresAt: message.expires_at, now: context.now }
  if (message.purpose === 'invitation') {
    // A stored name that fails today's rule (stored before it, or edited in the database) is not mailed.
    const checked = checkOrganizationName(context.organizationName ?? '')
    const organizationName = checked.ok ? checked.name : (UNNAMED_ORGANIZATION[message.locale] ?? UNNAMED_ORGANIZATION.en!)
    return templates.render('invitation', message.channel, message.locale, {
      ...base,
      organizationName,
      link: `${context.invitationLinkBaseUrl}/join#token=${secret.toString('base64url')}`,
    })
  }
  if (message.purpose === 'security_notice') {
    let notice: { event?: unknown; at?: unknown; identifier?: unknown }
    try {
      notice = JSON.parse(secret.toString('utf8')) as typeof notice
    } catch {
      throw new UnreadableBodyError('security notice body is not JSON')
    }
    const at = typeof notice.at === 'string' ? new Date(notice.at) : new Date(Number.NaN)
    if (typeof notice.event !== 'string' || typeof notice.identifier !== 'string' || Number.isNaN(at.getTime()))
      throw new UnreadableBodyError('security notice body is not {event, at, identifier}')
    return templates.render('security_notice', message.channel, message.locale, {
      ...base,
      notice: { event: notice.event, at, identifier: notice.identifier },
    })
  }
  if (COURIER_ONLY_PURPOSES.has(message.purpose)) {
    const body = decodeCourierBody(secret)
    if (!body) throw new UnreadableBodyError('courier message body is not {code} or {link}')
    // A link with its code beside it (`otp`) is rendered as a link that names the code too.
    const secretValue = 'code' in body ? { code: body.code } : { link: body.link, ...(body.otp === undefined ? {} : { code: body.otp }) }
    const rendered = templates.render(message.purpose as 'verification_code', message.channel, message.locale, {
      ...base,
      ...secretValue,
      // Checked again as an invitation's organization name is: a name that fails today's rule is not mailed.
      ...(body.appName !== undefined && checkOrganizationName(body.appName).ok ? { appName: body.appName } : {}),
    })
    // A code alone too, for a provider that fills in a pre-approved template itself; a link message is a link.
    return 'code' in body ? { ...rendered, code: body.code } : rendered
  }
  const code = secret.toString('utf8')
  // The code alone too: a provider that sends a pre-approved template fills it in itself (src/providers/whatsapp-cloud/connector.ts).
  return { ...templates.render(message.purpose as 'sign_up', message.channel, message.locale, { ...base, code }), code }
}

let defaults: Templates | undefined
/** Templates with the default branding, for workers built without configuration (tests, bench). */
export function defaultTemplates(): Templates {
  return (defaults ??= loadTemplates({ productName: 'Sealpost', defaultLocale: 'en' } satisfies Branding))
}
