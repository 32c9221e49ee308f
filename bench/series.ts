/** A row's target: its text in the table, and whether the repetitions' median (and max) meet it. */
export type Target = { text: string; pass: (median: number, max: number) => boolean }

type Series = { name: string; unit: string; values: number[]; target?: Target }

/** The run's rows, one value per repetition each, and the Markdown table of their min, median and max. */
export function benchSeries() {
  const series = new Map<string, Series>()
  const record = (name: string, unit: string, value: number, target?: Target) => {
    const entry = series.get(name) ?? { name, unit, values: [], target }
    entry.values.push(value)
    series.set(name, entry)
  }
  const table = () => {
    const rows = [...series.values()].map((entry) => {
      const sorted = [...entry.values].sort((a, b) => a - b)
      const median = sorted[Math.floor(sorted.length / 2)]!
      const result = entry.target ? (entry.target.pass(median, sorted.at(-1)!) ? 'PASS' : 'FAIL') : ''
      return {
        name: entry.name,
        unit: entry.unit,
        min: sorted[0]!,
        median,
        max: sorted.at(-1)!,
        target: entry.target?.text ?? '',
        result,
        values: entry.values,
      }
    })
    // Two decimals below 10, so a ratio near its target (1.63 against ≤ 1.6) reads as it was judged.
    const format = (value: number) => (value >= 100 ? value.toFixed(0) : value >= 10 ? value.toFixed(1) : value.toFixed(2))
    const text = [
      '| measure | unit | min | median | max | target | result |',
      '|---|---|---:|---:|---:|---|---|',
      ...rows.map(
        (row) =>
          `| ${row.name} | ${row.unit} | ${format(row.min)} | ${format(row.median)} | ${format(row.max)} | ${row.target} | ${row.result} |`,
      ),
    ].join('\n')
    return { rows, table: text }
  }
  return { record, table }
}
