import { describeError, type Logger } from '../logging/logger.ts'

// Let stdout drain and the loop empty on its own; a leftover handle must not hold the exit.
function exitSoon(code: number): void {
  process.exitCode = code
  setTimeout(() => process.exit(code), 1_000).unref()
}

/**
 * SIGTERM/SIGINT stop the process gracefully through `stop`; a second signal forces exit.
 * The process exits 0 after a clean stop, 1 if stopping failed.
 */
export function stopOnSignals(stop: () => Promise<void>, logger: Logger): void {
  let stopping = false
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      logger.warn('second signal: exiting now', { signal })
      process.exit(1)
    }
    stopping = true
    logger.info('stopping', { signal })
    stop().then(
      () => exitSoon(0),
      (error: unknown) => {
        logger.error('stop failed', describeError(error))
        exitSoon(1)
      },
    )
  }
  process.on('SIGTERM', onSignal)
  process.on('SIGINT', onSignal)
}
