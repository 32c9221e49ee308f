import path from 'node:path'
import { ConfigError, type ProcessRole } from '../../config/schema.ts'
import { loadConfig, type Config } from '../providers/config.ts'
import { UnsafeConnectionError } from '../db/connection-guard.ts'
import { DatabaseUnavailableError } from '../db/unavailable.ts'
import { QueueLeaseError } from '../db/queue-lease.ts'
import { describeReleaseFailure, ReleaseError } from '../db/release-failure.ts'
import { TemplateError } from '../delivery/template-error.ts'
import { createLogger, describeError, type Logger } from '../logging/logger.ts'
import { describeCliFailure } from './cli-failure.ts'

// Errors whose messages we wrote ourselves and that name variables, never values.
const SAFE_TO_PRINT = [ConfigError, UnsafeConnectionError, DatabaseUnavailableError, QueueLeaseError, ReleaseError, TemplateError]

/**
 * Runs an entry point: reads the configuration once, builds the logger, and turns a startup
 * failure into one clear line on stderr and exit code 1.
 */
export async function main(role: ProcessRole, run: (config: Config, logger: Logger) => Promise<void>): Promise<void> {
  let logger: Logger | undefined
  let dataDir = process.env.SEALPOST_DATA_DIR || '.data'
  try {
    const config = loadConfig(process.env, role)
    dataDir = config.SEALPOST_DATA_DIR
    logger = createLogger({ level: config.LOG_LEVEL, base: { process: role } })
    await run(config, logger)
  } catch (error) {
    const safe =
      SAFE_TO_PRINT.some((type) => error instanceof type) || (error instanceof Error && error.message.startsWith('embedded PostgreSQL'))
    if (role === 'cli') {
      // A helper someone typed: one line, what went wrong and what to do (no log line, no stack).
      const helper = process.env.npm_lifecycle_event ?? path.basename(process.argv[1] ?? 'cli', '.ts')
      console.error(`${helper}: ${describeCliFailure(error, { safe, dataDir })}`)
    } else {
      // The release step runs once per deploy as the owner: it shows PostgreSQL's own words and a remedy.
      console.error(
        safe
          ? (error as Error).message
          : role === 'release'
            ? describeReleaseFailure(error)
            : `${role} failed to start: ${JSON.stringify(describeError(error))}`,
      )
      logger?.error('startup failed', describeError(error))
    }
    process.exitCode = 1
    setTimeout(() => process.exit(1), 1_000).unref()
  }
}

/** A required setting for a process that has no development fallback. */
export function required<T>(value: T | undefined, variable: string, why: string): T {
  if (value === undefined) throw new ConfigError([{ variable, problem: why }])
  return value
}
