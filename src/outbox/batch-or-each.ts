/** An item whose work failed even when run alone. */
export type Failed = { kind: 'failed'; error: unknown }

/**
 * Runs `work` over all items in one go (one transaction for a batch); if that cannot commit and
 * there are several, runs it for each item alone, so one bad item costs only its own result.
 * Results come back in item order; nothing runs for no items.
 */
export async function batchOrEach<T, R>(items: readonly T[], work: (items: readonly T[]) => Promise<R[]>): Promise<(R | Failed)[]> {
  if (items.length === 0) return []
  try {
    return await work(items)
  } catch (error) {
    if (items.length === 1) return [{ kind: 'failed', error }]
    const results: (R | Failed)[] = []
    for (const item of items) {
      try {
        results.push(...(await work([item])))
      } catch (alone) {
        results.push({ kind: 'failed', error: alone })
      }
    }
    return results
  }
}
