// Plain-text media have no markup to escape, but a value must never start a line of its own or
// hide behind bidirectional overrides: control, format and line-separator characters become a space.
const UNSAFE_IN_TEXT = /[\p{Cc}\p{Cf}\u2028\u2029]/gu
/** A value as plain text: no control, format or line-separator character survives. */
export function plainText(value: string): string {
  return value.replace(UNSAFE_IN_TEXT, ' ')
}
