import type { Knex } from 'knex'

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE SCHEMA identity;

    CREATE TABLE identity.identities (
      id uuid PRIMARY KEY,
      status text NOT NULL CHECK (status IN ('pending', 'active', 'disabled')),
      created_at timestamptz NOT NULL DEFAULT now()
    );

    CREATE TABLE identity.login_identifiers (
      id uuid PRIMARY KEY,
      identity_id uuid NOT NULL REFERENCES identity.identities (id),
      kind text NOT NULL CHECK (kind IN ('email', 'phone')),
      value text NOT NULL,
      verified_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (kind, value)
    );
    CREATE INDEX login_identifiers_identity_idx ON identity.login_identifiers (identity_id);

    CREATE TABLE identity.password_credentials (
      identity_id uuid PRIMARY KEY REFERENCES identity.identities (id),
      password_hash text NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now()
    );

    CREATE TABLE identity.challenges (
      id uuid PRIMARY KEY,
      purpose text NOT NULL CHECK (purpose IN ('sign_up', 'add_sign_in_method', 'password_recovery', 'step_up')),
      identity_id uuid NOT NULL REFERENCES identity.identities (id),
      login_identifier_id uuid NOT NULL REFERENCES identity.login_identifiers (id),
      code_hash bytea NOT NULL CHECK (octet_length(code_hash) = 32),
      expires_at timestamptz NOT NULL,
      attempts_left integer NOT NULL DEFAULT 5 CHECK (attempts_left >= 0),
      resend_count integer NOT NULL DEFAULT 0 CHECK (resend_count >= 0),
      last_sent_at timestamptz NOT NULL DEFAULT now(),
      consumed_at timestamptz,
      revoked_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX challenges_open_idx ON identity.challenges (identity_id, login_identifier_id, purpose)
      WHERE consumed_at IS NULL AND revoked_at IS NULL;
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP SCHEMA identity CASCADE')
}
