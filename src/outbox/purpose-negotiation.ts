import type { Purpose } from './constants.ts'
import type { ReaderCensus } from './envelope-readers-sql.ts'

/**
 * Which purposes a worker renders, as a generation number its sessions announce beside the
 * envelope versions (docs/upgrading.md "Format negotiation"): 1 is release 0.1.0's five purposes,
 * 2 adds 0.2.0's `security_notice`, 3 adds the courier's `verification_code` and `magic_link`.
 * A release that adds a purpose raises it and names the purpose below.
 */
export const PURPOSES_GENERATION = 3
const ANNOUNCEMENT = ';purposes='
const ENVELOPES_ANNOUNCEMENT = ';envelopes='

/** The generation that first rendered each purpose. */
const FIRST_RENDERED_IN: Readonly<Record<Purpose, number>> = Object.freeze({
  sign_up: 1,
  add_sign_in_method: 1,
  password_recovery: 1,
  step_up: 1,
  invitation: 1,
  security_notice: 2,
  verification_code: 3,
  magic_link: 3,
})

/**
 * The purposes announcement of a worker session, placed before the envelopes one: release 0.2.0's
 * web reads the envelope versions from `;envelopes=` to the end of the name, so it still reads them
 * unchanged (`sealpost-worker-boss;purposes=3;envelopes=v1,v2`).
 */
export function purposesAnnouncement(): string {
  return `${ANNOUNCEMENT}${PURPOSES_GENERATION}`
}

/**
 * The generation a worker session renders, from its application name: its announcement; else 0.2.0
 * (envelopes announced, purposes not: 2) or 0.1.0 (nothing announced: 1).
 */
export function purposesGenerationOf(applicationName: string): number {
  const match = /;purposes=(\d{1,6})(?:;|$)/.exec(applicationName)
  if (match) return Number(match[1])
  return applicationName.includes(ENVELOPES_ANNOUNCEMENT) ? 2 : 1
}

/**
 * The generation every live worker renders: the lowest announced among the sessions the envelope
 * negotiation counts as readers (a session announcing nothing counts only during the upgrade window
 * from 0.1.0: after it, it is no reader of ours). No worker connected: none bounds it, so every
 * purpose is accepted and waits for whichever worker connects next. An announcement comes from the
 * worker login: a stolen one announcing an old generation only makes the web refuse new purposes
 * (a retryable 503); it cannot make anything accepted that a live worker would not render.
 */
export function fleetPurposesGeneration(census: ReaderCensus): number {
  const readers = census.liveWorkers.filter((name) => census.legacyFleetRegistered || name.includes(ENVELOPES_ANNOUNCEMENT))
  return readers.reduce((lowest, name) => Math.min(lowest, purposesGenerationOf(name)), Number.POSITIVE_INFINITY)
}

/** Whether a message of this purpose may be accepted now: every live worker of `generation` renders it. */
export function renderedByFleet(purpose: Purpose, generation: number): boolean {
  return FIRST_RENDERED_IN[purpose] <= generation
}
