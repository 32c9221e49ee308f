import { describeError, type Logger } from '../logging/logger.ts'

// Let stdout drain and the loop empty on its own; a leftover handle must not hold the exit.
function exitSoon(code: number): void {
  process.exitCode = code
  setTimeout(() => process.exit(code), 1_000).unref()
}

/** A repeat of the first signal within this long is the same stop, not a second one. */
const SAME_SIGNAL_MS = 1_000

/**
 * Takes SIGTERM/SIGINT from the first moment of a process: a signal that arrives while it is
 * still starting (a worker may already be sending) stops it as soon as `stopWith` names how.
 * The stop is graceful; a second signal forces exit (the same one repeated within a second does not). Exit code 0 after a clean stop, 1 otherwise.
 */
export function handleSignals(logger: Logger): { stopWith: (stop: () => Promise<void>) => void } {
  let stop: (() => Promise<void>) | undefined
  let signalled: NodeJS.Signals | undefined
  let stopping = false
  const begin = () => {
    if (stopping || !stop || !signalled) return
    stopping = true
    logger.info('stopping', { signal: signalled })
    stop().then(
      () => exitSoon(0),
      (error: unknown) => {
        logger.error('stop failed', describeError(error))
        exitSoon(1)
      },
    )
  }
  let firstAt = 0
  const onSignal = (signal: NodeJS.Signals) => {
    // One signal to `npm start`'s process group arrives twice: from the sender and forwarded by npm.
    if (signalled === signal && Date.now() - firstAt < SAME_SIGNAL_MS) return
    if (signalled) {
      logger.warn('second signal: exiting now', { signal })
      process.exit(1)
    }
    signalled = signal
    firstAt = Date.now()
    if (!stop) logger.info('signal during startup: stopping once started', { signal })
    begin()
  }
  process.on('SIGTERM', onSignal)
  process.on('SIGINT', onSignal)
  return {
    stopWith(next) {
      stop = next
      begin()
    },
  }
}
