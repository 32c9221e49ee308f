/** Renders trusted constant names as a SQL IN-list; only for compile-time constants, never input. */
export function sqlList(values: readonly string[]): string {
  return values
    .map((value) => {
      if (!/^[a-zA-Z_]+$/.test(value)) throw new Error('sqlList takes identifiers-like constants only')
      return `'${value}'`
    })
    .join(', ')
}
