import type { z } from 'zod'
import type { SettingsOf } from './definition.ts'
import { ses } from './ses/index.ts'
import { smtp } from './smtp/index.ts'
import { twilio } from './twilio/index.ts'
import { wasender } from './wasender/index.ts'
import { whatsappCloud } from './whatsapp-cloud/index.ts'

/**
 * Every provider Sealpost can send through, one line each (docs/architecture.md §9 "a provider").
 * Everything that depends on which providers exist reads this list: the environment schema and
 * its checks (./config.ts), the configuration page, the worker's connectors, each channel's
 * choice (./channels.ts), the webhook routes of the web and the fakes of `npm start` (./wiring.ts).
 * Within a channel, this order is the default order of the docs; the worker's order is the channel's setting.
 */
export const PROVIDERS = Object.freeze([ses, smtp, wasender, whatsappCloud, twilio] as const)

/** One provider of the registry. */
export type RegisteredProvider = (typeof PROVIDERS)[number]

type UnionToIntersection<U> = (U extends unknown ? (union: U) => void : never) extends (intersection: infer I) => void ? I : never
type ShapeOf<P> = P extends { settings: { shape: infer S extends z.ZodRawShape } } ? S : never
/** Every registered provider's settings shape, merged: what the environment schema adds for them. */
export type ProviderShapes = UnionToIntersection<ShapeOf<RegisteredProvider>>
/** Every registered provider's settings, as parsed. */
export type ProviderSettings = SettingsOf<ProviderShapes>
