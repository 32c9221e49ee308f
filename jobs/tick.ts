import { describeError, type Logger } from '../src/logging/logger.ts'

/**
 * Runs one scheduled pass and writes its one summary line (counts, duration). A failure is logged
 * by name and code and swallowed: the schedule's next tick is the retry, so a broken pass never
 * piles up pg-boss retries, and it is never silent.
 */
export async function runTick(
  name: string,
  logger: Logger,
  pass: () => Promise<Record<string, number>>,
  counted?: (counts: Record<string, number>) => void,
): Promise<void> {
  const started = performance.now()
  try {
    const counts = await pass()
    counted?.(counts)
    logger.info(`${name} done`, { ...counts, durationMs: Math.round(performance.now() - started) })
  } catch (error) {
    logger.error(`${name} failed; the next tick retries`, { ...describeError(error), durationMs: Math.round(performance.now() - started) })
  }
}
