import type { Purpose } from '../outbox/constants.ts'

const SUBJECTS: Record<Purpose, string> = {
  sign_up: 'Confirm your Sealpost sign-up',
  add_sign_in_method: 'Confirm your new sign-in method',
  password_recovery: 'Your password recovery code',
  step_up: 'Your verification code',
  invitation: 'You have been invited to an organization',
}

const ACTIONS: Record<Exclude<Purpose, 'invitation'>, string> = {
  sign_up: 'finish signing up',
  add_sign_in_method: 'add this sign-in method',
  password_recovery: 'reset your password',
  step_up: 'confirm it is you',
}

/** The plain-text message for a one-time code. */
export function renderCodeMessage(purpose: Exclude<Purpose, 'invitation'>, code: string, expiresAt: Date, now: Date): { subject: string; text: string } {
  const minutes = Math.max(1, Math.round((expiresAt.getTime() - now.getTime()) / 60_000))
  return {
    subject: SUBJECTS[purpose],
    text:
      `Your code to ${ACTIONS[purpose]} is ${code}.\n\n` +
      `It expires in ${minutes} minute${minutes === 1 ? '' : 's'}. ` +
      'If you did not ask for it, you can ignore this message; nobody can use it without your inbox.\n',
  }
}
