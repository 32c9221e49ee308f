import type { Knex } from 'knex'

/**
 * Organization names are mailed inside invitations. The web refuses links,
 * addresses and invisible characters (src/organization/organization-name.ts); the database keeps
 * the part of that rule it can state exactly: no control characters, bidi controls, zero-width
 * characters or line and paragraph separators in a new or changed name. NOT VALID: rows written
 * before this rule are left for the worker's plain-text template, which mails no name that fails it.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(String.raw`
    ALTER TABLE organization.organizations ADD CONSTRAINT organizations_name_plain_chk
      CHECK (name !~ '[\u0001-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff]') NOT VALID
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE organization.organizations DROP CONSTRAINT organizations_name_plain_chk')
}
