import type { Knex } from 'knex'
import { SealpostError } from '../errors/sealpost-error.ts'

/** The web or worker was handed a connection with more power than its role: refuse to start. */
export class UnsafeConnectionError extends SealpostError {
  override name = 'UnsafeConnectionError'
}

/**
 * Least privilege (docs/architecture.md §6): web and worker run as members of their group role, never as a superuser, a role
 * that bypasses row security, or the owner of the schemas. Checked once at startup.
 */
export async function assertConnectionRole(db: Knex, groupRole: string, variable: string): Promise<void> {
  const { rows } = await db.raw<{ rows: { rolsuper: boolean; rolbypassrls: boolean; member: boolean; owner: boolean }[] }>(
    `SELECT r.rolsuper, r.rolbypassrls,
            pg_has_role(current_user, ?, 'MEMBER') AS member,
            EXISTS (SELECT FROM pg_namespace n WHERE n.nspname IN ('outbox', 'identity', 'pgboss')
                    AND pg_has_role(current_user, n.nspowner, 'MEMBER')) AS owner
       FROM pg_roles r WHERE r.rolname = current_user`,
    [groupRole],
  )
  const role = rows[0]
  if (!role) throw new UnsafeConnectionError(`${variable}: the connected role cannot be inspected`)
  if (role.rolsuper || role.rolbypassrls)
    throw new UnsafeConnectionError(`${variable} connects as a superuser or BYPASSRLS role; use a login member of ${groupRole}`)
  if (role.owner) throw new UnsafeConnectionError(`${variable} connects as the schema owner; use a login member of ${groupRole}`)
  if (!role.member) throw new UnsafeConnectionError(`${variable} connects as a role that is not a member of ${groupRole}`)
}
