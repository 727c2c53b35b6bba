import type { Migration } from './migration.js';

/**
 * Dashboard sign-in: users, sessions and the failed-sign-in throttle. Times are epoch ms. Secrets
 * are never stored as given: passwords as salted scrypt hashes, session tokens as SHA-256 hashes
 * (they carry 256 random bits, so nothing is left to brute-force).
 *
 * PostgreSQL: the same tables and constraints. Never edit once landed: add the next migration.
 */

const sqlite = `
CREATE TABLE dashboard_users (
  id              TEXT PRIMARY KEY,
  org_id          TEXT NOT NULL REFERENCES organizations(id),
  email           TEXT NOT NULL UNIQUE,
  role            TEXT NOT NULL CHECK (role IN ('owner', 'approver', 'viewer')),
  password_salt   BLOB NOT NULL,
  password_hash   BLOB NOT NULL,
  password_params TEXT NOT NULL,
  created_at      INTEGER NOT NULL,
  disabled        INTEGER NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1))
) STRICT;
CREATE INDEX dashboard_users_by_org ON dashboard_users (org_id, created_at);

CREATE TABLE dashboard_sessions (
  token_hash BLOB PRIMARY KEY,
  user_id    TEXT NOT NULL REFERENCES dashboard_users(id),
  csrf_token TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
) STRICT;
CREATE INDEX dashboard_sessions_by_user ON dashboard_sessions (user_id);
CREATE INDEX dashboard_sessions_expiry ON dashboard_sessions (expires_at);

-- One row per email that failed to sign in recently, known or not, so a lockout says nothing
-- about whether the address has an account.
CREATE TABLE dashboard_login_failures (
  email        TEXT PRIMARY KEY,
  failures     INTEGER NOT NULL,
  window_start INTEGER NOT NULL,
  locked_until INTEGER NOT NULL DEFAULT 0
) STRICT;
`;

const postgres = `
CREATE TABLE dashboard_users (
  id              TEXT COLLATE "C" PRIMARY KEY,
  org_id          TEXT COLLATE "C" NOT NULL REFERENCES organizations(id),
  email           TEXT COLLATE "C" NOT NULL UNIQUE,
  role            TEXT COLLATE "C" NOT NULL CHECK (role IN ('owner', 'approver', 'viewer')),
  password_salt   BYTEA NOT NULL,
  password_hash   BYTEA NOT NULL,
  password_params TEXT COLLATE "C" NOT NULL,
  created_at      BIGINT NOT NULL,
  disabled        BIGINT NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1))
);
CREATE INDEX dashboard_users_by_org ON dashboard_users (org_id, created_at);

CREATE TABLE dashboard_sessions (
  token_hash BYTEA PRIMARY KEY,
  user_id    TEXT COLLATE "C" NOT NULL REFERENCES dashboard_users(id),
  csrf_token TEXT COLLATE "C" NOT NULL,
  created_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL
);
CREATE INDEX dashboard_sessions_by_user ON dashboard_sessions (user_id);
CREATE INDEX dashboard_sessions_expiry ON dashboard_sessions (expires_at);

-- One row per email that failed to sign in recently, known or not.
CREATE TABLE dashboard_login_failures (
  email        TEXT COLLATE "C" PRIMARY KEY,
  failures     BIGINT NOT NULL,
  window_start BIGINT NOT NULL,
  locked_until BIGINT NOT NULL DEFAULT 0
);
`;

export const migration: Migration = { version: 2, name: 'dashboard', sqlite, postgres };
