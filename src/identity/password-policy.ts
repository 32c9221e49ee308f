import { BreachedPasswordError, WeakPasswordError } from './errors.ts'

/**
 * What a new password must be (ASVS 4.0.3 2.1.1, 2.1.2, 2.1.7): at least 12 characters, at most
 * 200 (the request schemas' bound, in UTF-16 units as JSON strings are measured), and not one
 * seen in a breach when the check is configured. Nothing else: no composition rules (2.1.9).
 */
export const PASSWORD_POLICY = Object.freeze({ minCharacters: 12, maxLength: 200 })

/**
 * Characters as a person counts them: Unicode code points after NFC (a precomposed "é" and "e" +
 * combining accent are one), with a run of whitespace counted once (ASVS 2.1.1: "after multiple
 * spaces are combined"). Only for counting: the password itself is hashed as given.
 */
export function passwordCharacters(password: string): number {
  return [...password.normalize('NFC').replace(/\s{2,}/gu, ' ')].length
}

/** What a breached-password lookup found; `unavailable` when it could not tell (src/identity/breached-passwords.ts). */
export type BreachOutcome = 'clean' | 'breached' | 'unavailable'
export type BreachedPasswordCheck = (password: string) => Promise<BreachOutcome>

declare const accepted: unique symbol
/** A password that passed `acceptNewPassword`: the only kind the use cases that set one take. */
export type AcceptedPassword = string & { readonly [accepted]: true }

/**
 * The one home of the rule, for every route that sets a password (sign-up, recovery, change).
 * It depends on the password alone, never on an account, so its refusal tells nothing about one.
 * A check that cannot answer accepts the password (fail-open: the length rule still holds, and
 * an outage of a third party must not stop people from signing up or recovering their account;
 * the check logs it and the web counts it: docs/security.md "Security properties").
 */
export async function acceptNewPassword(password: string, breached?: BreachedPasswordCheck): Promise<AcceptedPassword> {
  if (passwordCharacters(password) < PASSWORD_POLICY.minCharacters) throw new WeakPasswordError(PASSWORD_POLICY.minCharacters)
  if (breached && (await breached(password)) === 'breached') throw new BreachedPasswordError()
  return password as AcceptedPassword
}
