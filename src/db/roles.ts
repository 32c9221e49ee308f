import type { Knex } from 'knex'
import type { CoreConfig } from '../../config/schema.ts'

/**
 * The NOLOGIN group roles migration 20261130000100_roles creates. Migrations are history and spell
 * these names out themselves; running code takes them from here (test/db.roles.test.ts checks both agree).
 */
export const API_ROLE = 'sealpost_api'
export const WORKER_ROLE = 'sealpost_worker'

/** The roles web and worker logins act as: the group roles, or existing roles a platform made. */
export type DatabaseRoles = Readonly<{ api: string; worker: string; named: boolean }>

/**
 * SEALPOST_API_ROLE / SEALPOST_WORKER_ROLE name existing roles (e.g. Heroku `pg:credentials`);
 * without them the release step creates and grants to the NOLOGIN group roles (docs/deploying.md "Database roles in production").
 */
export function databaseRoles(config: Pick<CoreConfig, 'SEALPOST_API_ROLE' | 'SEALPOST_WORKER_ROLE'>): DatabaseRoles {
  if (config.SEALPOST_API_ROLE && config.SEALPOST_WORKER_ROLE)
    return { api: config.SEALPOST_API_ROLE, worker: config.SEALPOST_WORKER_ROLE, named: true }
  return { api: API_ROLE, worker: WORKER_ROLE, named: false }
}

const DEFAULT_NAMES = new RegExp(`\\b(${API_ROLE}|${WORKER_ROLE})\\b`, 'g')

/**
 * Migrations are history and name the group roles literally. With named roles every occurrence
 * of those two names in a migration's SQL means the configured role instead. Safe as plain text:
 * the configured names are validated as unquoted identifiers (config/schema.ts), `\b` keeps
 * longer names such as `sealpost_api_login` untouched, and the group names occur in migrations
 * only as role names.
 */
export function rewriteRoleNames(sql: string, roles: DatabaseRoles): string {
  if (!roles.named) return sql
  return sql.replace(DEFAULT_NAMES, (name) => (name === API_ROLE ? roles.api : roles.worker))
}

/** A knex (or transaction) whose `raw` SQL goes through rewriteRoleNames: what migrations receive. */
export function withRoleNames<T extends Knex>(knex: T, roles: DatabaseRoles): T {
  if (!roles.named) return knex
  return new Proxy(knex, {
    get(target, property, receiver) {
      if (property === 'raw') {
        return (sql: string, ...bindings: unknown[]) =>
          (target.raw as (...args: unknown[]) => unknown)(rewriteRoleNames(sql, roles), ...bindings)
      }
      const value: unknown = Reflect.get(target, property, receiver)
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
}
