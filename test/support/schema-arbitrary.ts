import fc from 'fast-check'

/** A JSON Schema as the served API document writes it (OpenAPI 3.1). */
export type Schema = { [key: string]: unknown }

/** Values a field of this name should take to look real (an identifier, a password), besides what its schema says. */
export type Hints = (name: string) => fc.Arbitrary<unknown> | undefined

/**
 * Values valid by a request schema of the document: the subset of JSON Schema the document's
 * request bodies, parameters and headers use ($ref, const, enum, anyOf, object, array, string with
 * format, length and pattern, integer, number, boolean). Strings are kept short: the hostile
 * arbitraries below make the long ones.
 */
export function validFor(
  schema: Schema,
  components: Record<string, Schema>,
  hints: Hints = () => undefined,
  depth = 0,
): fc.Arbitrary<unknown> {
  const ref = schema.$ref
  if (typeof ref === 'string') return validFor(components[ref.replace('#/components/schemas/', '')] ?? {}, components, hints, depth)
  if ('const' in schema) return fc.constant(schema.const)
  if (Array.isArray(schema.enum)) return fc.constantFrom(...(schema.enum as unknown[]))
  for (const key of ['anyOf', 'oneOf'] as const) {
    const options = schema[key]
    if (Array.isArray(options)) return fc.oneof(...(options as Schema[]).map((option) => validFor(option, components, hints, depth + 1)))
  }
  if (Array.isArray(schema.allOf)) return validFor((schema.allOf as Schema[])[0]!, components, hints, depth)
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type
  switch (type) {
    case 'string':
      return stringFor(schema)
    case 'integer':
      return fc.integer({ min: Number(schema.minimum ?? -1_000), max: Number(schema.maximum ?? 1_000) })
    case 'number':
      return fc.double({ min: Number(schema.minimum ?? -1e6), max: Number(schema.maximum ?? 1e6), noNaN: true })
    case 'boolean':
      return fc.boolean()
    case 'null':
      return fc.constant(null)
    case 'array':
      return fc.array(validFor((schema.items as Schema | undefined) ?? {}, components, hints, depth + 1), {
        minLength: Number(schema.minItems ?? 0),
        maxLength: Math.min(Number(schema.maxItems ?? 3), 3),
      })
    case 'object': {
      const properties = (schema.properties ?? {}) as Record<string, Schema>
      const required = (schema.required ?? []) as string[]
      if (Object.keys(properties).length === 0)
        return fc.dictionary(fc.string({ maxLength: 8 }), depth > 2 ? fc.string() : fc.jsonValue({ maxDepth: 1 }), { maxKeys: 3 })
      const model = Object.fromEntries(
        Object.entries(properties).map(([name, property]) => [name, hints(name) ?? validFor(property, components, hints, depth + 1)]),
      )
      return fc.record(model, { requiredKeys: required })
    }
    default:
      return depth > 2 ? fc.constant(null) : fc.jsonValue({ maxDepth: 2 })
  }
}

function stringFor(schema: Schema): fc.Arbitrary<string> {
  const minLength = Number(schema.minLength ?? 0)
  const maxLength = Math.min(Number(schema.maxLength ?? 40), 64)
  const fits = (value: string) => value.length >= minLength && value.length <= Number(schema.maxLength ?? Infinity)
  if (schema.format === 'uuid') return fc.uuid()
  if (schema.format === 'email') return fc.emailAddress().filter(fits)
  if (schema.format === 'date-time') return fc.date({ noInvalidDate: true }).map((date) => date.toISOString())
  if (typeof schema.pattern === 'string') return fc.stringMatching(new RegExp(schema.pattern)).filter(fits)
  return fc.string({ minLength, maxLength: Math.max(minLength, maxLength) })
}

/** Strings an attacker tries: control bytes, lone surrogates, look-alikes, full-width digits, long and odd ones. */
export const hostileString: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    '',
    ' ',
    '\u0000',
    'a\u0000b',
    '\u0007\u001b[31m',
    '\r\nX-Injected: 1',
    '\ud800',
    'x\udfffy',
    'аlice@example.com', // Cyrillic а
    'ＡＤＭＩＮ@example.com',
    '+５４９１１５５５５４４５５',
    '１２３４５６',
    '\u202egnp.exe',
    'a\u200bb',
    '👩‍👩‍👧‍👦',
    "' OR 1=1 --",
    '../../../etc/passwd',
    '<script>alert(1)</script>',
    '%00',
    '%ZZ',
    '__proto__',
    'null',
    'NaN',
    '-1',
    '1e309',
  ),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom(300, 5_000, 20_000).map((length) => 'x'.repeat(length)),
)

/** Any JSON-ish value of the wrong kind. */
export const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  hostileString,
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.jsonValue({ maxDepth: 1 }), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 3 }),
)

/** A body as sent: JSON of a valid, a broken or a wrong value, or bytes that are not JSON at all. */
export function hostileBody(valid: fc.Arbitrary<unknown>): fc.Arbitrary<string | Buffer | undefined> {
  const broken = valid.chain((value) => {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return fc.constant(value)
    const keys = Object.keys(value)
    return fc.oneof(
      // A key missing, a key added, a key of the wrong type.
      keys.length > 0 ? fc.constantFrom(...keys).map((key) => omit(value, key)) : fc.constant(value),
      fc
        .tuple(fc.constantFrom('isAdmin', 'role', '__proto__', 'constructor', 'x'), hostileValue)
        .map(([key, v]) => ({ ...value, [key]: v })),
      keys.length > 0 ? fc.tuple(fc.constantFrom(...keys), hostileValue).map(([key, v]) => ({ ...value, [key]: v })) : fc.constant(value),
    )
  })
  return fc.oneof(
    { weight: 3, arbitrary: valid.map((value) => JSON.stringify(value)) },
    { weight: 4, arbitrary: broken.map((value) => JSON.stringify(value)) },
    { weight: 1, arbitrary: hostileValue.map((value) => JSON.stringify(value)) },
    {
      weight: 1,
      arbitrary: fc.constantFrom<string | Buffer | undefined>(
        undefined,
        '',
        '{"identifier":',
        '{"a":1,"a":2}',
        '\u0000',
        Buffer.from([0xff, 0xfe, 0x00, 0x7b]),
        Buffer.from([0x1f, 0x8b, 0x08, 0x00]),
      ),
    },
  )
}

function omit(value: object, key: string): Record<string, unknown> {
  return Object.fromEntries(Object.entries(value).filter(([name]) => name !== key))
}
