import { z } from 'zod'
import { SealpostError } from '../src/errors/sealpost-error.ts'

/** One reason the environment cannot start a process: the variable, and what is wrong (never its value). */
export type Problem = { variable: string; problem: string }

/** Raised when the environment cannot start a process; its message names variables, never values. */
export class ConfigError extends SealpostError {
  override name = 'ConfigError'
  readonly variables: string[]
  constructor(problems: Problem[]) {
    super('Invalid configuration:\n' + problems.map((p) => `  - ${p.variable}: ${p.problem}`).join('\n'))
    this.variables = problems.map((p) => p.variable)
  }
}

/** The process roles of the Procfile plus the CLI; each needs different settings in production. */
export type ProcessRole = 'release' | 'web' | 'worker' | 'cli' | 'all-in-one'

/** A database or an HTTP(S) service (a provider's API, a link base). */
export const url = z.url({ protocol: /^(postgres|postgresql|https?)$/ })

export const positiveInt = (fallback: number) => z.coerce.number().int().positive().default(fallback)

/** At least `min` characters of a secret (a token, a signing secret), never quoted back. */
export const secret = (min: number) => z.string().min(min, `must be at least ${min} characters`)

/** A text setting through its parser, a parse error becoming the variable's problem. */
export const parsedText = <T>(parse: (text: string) => T) =>
  z.string().transform((text, ctx) => {
    try {
      return parse(text)
    } catch (error) {
      ctx.addIssue({ code: 'custom', message: (error as Error).message })
      return z.NEVER
    }
  })

/** Whether a URL names this machine (a local relay, a fake): the one place plain http is allowed in staging and production. */
export function isLoopback(url: URL): boolean {
  return url.hostname === 'localhost' || url.hostname === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(url.hostname)
}
