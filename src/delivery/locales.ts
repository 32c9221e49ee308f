/** The locales whose templates ship in templates/ (docs/delivery.md "Message templates"). */
export const LOCALES = Object.freeze(['en', 'de', 'es'] as const)
export type Locale = (typeof LOCALES)[number]

export function isLocale(value: string): value is Locale {
  return (LOCALES as readonly string[]).includes(value)
}
