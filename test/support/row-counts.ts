import type { Knex } from 'knex'

/**
 * The row count of every table in the schemas a request can write (identity, organization, outbox,
 * platform), by `schema.table`: equal before and after a refused request means it wrote nothing.
 */
export async function rowCounts(owner: Knex): Promise<Record<string, number>> {
  const tables: { table_schema: string; table_name: string }[] = await owner('information_schema.tables')
    .whereIn('table_schema', ['identity', 'organization', 'outbox', 'platform'])
    .andWhere('table_type', 'BASE TABLE')
    .orderBy(['table_schema', 'table_name'])
    .select('table_schema', 'table_name')
  const counts: Record<string, number> = {}
  for (const { table_schema: schema, table_name: table } of tables) {
    const [row] = await owner(`${schema}.${table}`).count({ n: '*' })
    counts[`${schema}.${table}`] = Number(row?.n)
  }
  return counts
}
