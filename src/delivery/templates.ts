import { checkOrganizationName } from '../organization/organization-name.ts'
import type { Purpose } from '../outbox/constants.ts'

const SUBJECTS: Record<Purpose, string> = {
  sign_up: 'Confirm your Sealpost sign-up',
  add_sign_in_method: 'Confirm your new sign-in method',
  password_recovery: 'Your password recovery code',
  step_up: 'Your verification code',
  invitation: 'You have been invited to an organization',
  security_notice: 'A change to your Sealpost account',
}

type CodePurpose = Exclude<Purpose, 'invitation' | 'security_notice'>

const ACTIONS: Record<CodePurpose, string> = {
  sign_up: 'finish signing up',
  add_sign_in_method: 'add this sign-in method',
  password_recovery: 'reset your password',
  step_up: 'confirm it is you',
}

/** The plain-text message for a one-time code. */
export function renderCodeMessage(purpose: CodePurpose, code: string, expiresAt: Date, now: Date): { subject: string; text: string } {
  const minutes = Math.max(1, Math.round((expiresAt.getTime() - now.getTime()) / 60_000))
  return {
    subject: SUBJECTS[purpose],
    text:
      `Your code to ${ACTIONS[purpose]} is ${code}.\n\n` +
      `It expires in ${minutes} minute${minutes === 1 ? '' : 's'}. ` +
      'If you did not ask for it, you can ignore this message; nobody can use it without your inbox.\n',
  }
}

/**
 * The plain-text invitation email: it names the organization and carries the join link. The
 * token travels in the fragment (`#token=`), which browsers never send to a server or a log. A
 * name that would fail today's rule (stored before it, or edited in the database) is not mailed:
 * the message says "an organization" instead, so no stored name can add a link or a line.
 */
export function renderInvitationMessage(organizationName: string, link: string, expiresAt: Date, now: Date): { subject: string; text: string } {
  const days = Math.max(1, Math.round((expiresAt.getTime() - now.getTime()) / 86_400_000))
  const checked = checkOrganizationName(organizationName)
  const organization = checked.ok ? `"${checked.name}"` : 'an organization'
  return {
    subject: SUBJECTS.invitation,
    text:
      `You have been invited to join ${organization} on Sealpost.\n\n` +
      `Open this link to accept: ${link}\n\n` +
      `The invitation expires in ${days} day${days === 1 ? '' : 's'} and works once. ` +
      'If you do not know this organization, you can ignore this message.\n',
  }
}

/** The sealed body of a security notice: what changed, when, and the identifier involved, masked. */
export type SecurityNoticeBody = { event: 'sign_in_method_added' | 'password_changed'; at: string; identifier: string }

const CHANGES: Record<SecurityNoticeBody['event'], string> = {
  sign_in_method_added: 'A new sign-in method was added to your account',
  password_changed: 'The password of your account was changed',
}

/**
 * A security notice: says what changed and when, names the identifier only masked, and carries no
 * link or code, so there is nothing in it a phisher could copy to look like us.
 */
export function renderSecurityNotice(body: SecurityNoticeBody): { subject: string; text: string } {
  return {
    subject: SUBJECTS.security_notice,
    text:
      `${CHANGES[body.event]} (${body.identifier}) at ${body.at} (UTC).\n\n` +
      'If this was you, there is nothing to do. If it was not, sign in with another of your sign-in methods, ' +
      'change your password and contact our support from our website; we never ask for codes or passwords.\n',
  }
}
