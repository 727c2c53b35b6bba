/**
 * PostgreSQL twin of ../../migrations/0002_dashboard.ts: dashboard users, sessions and the
 * failed-sign-in throttle. Secrets are stored hashed (scrypt for passwords, SHA-256 for session
 * tokens). Never edit once landed.
 */
export const sql = `
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
