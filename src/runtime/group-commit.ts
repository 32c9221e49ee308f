import type { Failed } from '../outbox/batch-or-each.ts'

/**
 * Group commit: items added within `windowMs` of the first of a group (or `maxGroup` of them)
 * go to `commit` together; up to `maxCommits` commits run at once and items arriving meanwhile
 * wait for the next group, never for the items in flight. Each item's promise settles with its
 * own result; a `Failed` result rejects that item alone.
 */
export function groupCommit<T, R>(
  commit: (items: T[]) => Promise<(R | Failed)[]>,
  options: { windowMs: number; maxGroup: number; maxCommits: number },
) {
  type Waiting = { item: T; resolve: (result: R) => void; reject: (error: unknown) => void }
  let waiting: Waiting[] = []
  let timer: NodeJS.Timeout | undefined
  let commits = 0
  const running = new Set<Promise<void>>()

  const flush = () => {
    if (timer) {
      clearTimeout(timer)
      timer = undefined
    }
    while (waiting.length > 0 && commits < options.maxCommits) {
      const group = waiting.slice(0, options.maxGroup)
      waiting = waiting.slice(group.length)
      commits += 1
      const run = (async () => {
        try {
          const results = await commit(group.map((entry) => entry.item))
          group.forEach((entry, index) => {
            const result = results[index]
            if (result && typeof result === 'object' && (result as Failed).kind === 'failed' && 'error' in (result as object))
              entry.reject((result as Failed).error)
            else entry.resolve(result as R)
          })
        } catch (error) {
          for (const entry of group) entry.reject(error)
        } finally {
          commits -= 1
          // Whatever arrived during this commit has waited long enough.
          if (waiting.length > 0) flush()
        }
      })()
      running.add(run)
      void run.finally(() => running.delete(run))
    }
  }

  return {
    add(item: T): Promise<R> {
      return new Promise<R>((resolve, reject) => {
        waiting.push({ item, resolve, reject })
        if (commits >= options.maxCommits) return
        if (waiting.length >= options.maxGroup) flush()
        else timer ??= setTimeout(flush, options.windowMs)
      })
    },
    async drain(): Promise<void> {
      while (waiting.length > 0 || running.size > 0) {
        flush()
        await Promise.allSettled([...running])
      }
    },
  }
}
