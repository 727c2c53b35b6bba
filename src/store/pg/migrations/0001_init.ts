/**
 * PostgreSQL twin of ../../migrations/0001_init.ts (same tables, columns, constraints and
 * indexes). SQLite INTEGER (64-bit) is BIGINT, BLOB is BYTEA, TEXT is TEXT COLLATE "C" (bytewise,
 * as SQLite orders and compares text, whatever the database's locale; keyset pages by id rely on
 * it). PostgreSQL types are strict like SQLite's STRICT tables. Times are epoch ms, USD amounts
 * integer micro-dollars, token amounts decimal TEXT. Never edit a landed migration: add the next one.
 */
export const sql = `
CREATE TABLE organizations (
  id                TEXT COLLATE "C" PRIMARY KEY,
  name              TEXT COLLATE "C" NOT NULL,
  approval_window_s BIGINT NOT NULL,
  created_at        BIGINT NOT NULL
);

CREATE TABLE treasuries (
  org_id         TEXT COLLATE "C" PRIMARY KEY REFERENCES organizations(id),
  address        TEXT COLLATE "C" NOT NULL,
  key_ciphertext BYTEA NOT NULL,
  created_at     BIGINT NOT NULL
);

CREATE TABLE api_keys (
  id         TEXT COLLATE "C" PRIMARY KEY,
  org_id     TEXT COLLATE "C" NOT NULL REFERENCES organizations(id),
  mode       TEXT COLLATE "C" NOT NULL CHECK (mode IN ('live', 'test')),
  prefix     TEXT COLLATE "C" NOT NULL,
  key_hash   BYTEA NOT NULL UNIQUE,
  label      TEXT COLLATE "C" NOT NULL DEFAULT '',
  created_at BIGINT NOT NULL,
  revoked_at BIGINT
);
CREATE INDEX api_keys_by_org ON api_keys (org_id, created_at);

CREATE TABLE agents (
  id           TEXT COLLATE "C" PRIMARY KEY,
  org_id       TEXT COLLATE "C" NOT NULL REFERENCES organizations(id),
  name         TEXT COLLATE "C" NOT NULL,
  status       TEXT COLLATE "C" NOT NULL CHECK (status IN ('active', 'paused', 'revoked')),
  created_at   BIGINT NOT NULL,
  updated_at   BIGINT NOT NULL,
  last_ping_at BIGINT
);
CREATE INDEX agents_by_org ON agents (org_id, created_at);

CREATE TABLE policies (
  agent_id                  TEXT COLLATE "C" PRIMARY KEY REFERENCES agents(id),
  allowlist                 TEXT COLLATE "C" NOT NULL,
  spend_cap_micros          BIGINT NOT NULL CHECK (spend_cap_micros >= 0),
  approval_threshold_micros BIGINT NOT NULL CHECK (approval_threshold_micros >= 0),
  updated_at                BIGINT NOT NULL
);

CREATE TABLE services (
  id              TEXT COLLATE "C" PRIMARY KEY,
  slug            TEXT COLLATE "C" NOT NULL UNIQUE,
  name            TEXT COLLATE "C" NOT NULL,
  description     TEXT COLLATE "C" NOT NULL,
  category        TEXT COLLATE "C" NOT NULL,
  logo_url        TEXT COLLATE "C" NOT NULL,
  docs_url        TEXT COLLATE "C" NOT NULL,
  payment_methods TEXT COLLATE "C" NOT NULL,
  endpoints       TEXT COLLATE "C" NOT NULL,
  created_at      BIGINT NOT NULL,
  updated_at      BIGINT NOT NULL
);

-- holds_cap is 1 while the row counts against the agent's rolling spend cap; cap_at is when its
-- amount started counting. The covering index lets the cap sum read only the index.
CREATE TABLE transactions (
  id              TEXT COLLATE "C" PRIMARY KEY,
  org_id          TEXT COLLATE "C" NOT NULL REFERENCES organizations(id),
  agent_id        TEXT COLLATE "C" NOT NULL REFERENCES agents(id),
  type            TEXT COLLATE "C" NOT NULL,
  status          TEXT COLLATE "C" NOT NULL,
  chain_id        BIGINT NOT NULL DEFAULT 0,
  recipient       TEXT COLLATE "C" NOT NULL DEFAULT '',
  amount_micros   BIGINT NOT NULL CHECK (amount_micros >= 0),
  holds_cap       BIGINT NOT NULL DEFAULT 0 CHECK (holds_cap IN (0, 1)),
  cap_at          BIGINT NOT NULL,
  reason          TEXT COLLATE "C" NOT NULL DEFAULT '',
  service_slug    TEXT COLLATE "C" NOT NULL DEFAULT '',
  resource_url    TEXT COLLATE "C" NOT NULL DEFAULT '',
  idempotency_key TEXT COLLATE "C",
  request_hash    TEXT COLLATE "C",
  request         TEXT COLLATE "C",
  result          TEXT COLLATE "C",
  approval_id     TEXT COLLATE "C",
  created_at      BIGINT NOT NULL,
  updated_at      BIGINT NOT NULL
);
CREATE UNIQUE INDEX transactions_idempotency ON transactions (agent_id, idempotency_key)
  WHERE idempotency_key IS NOT NULL;
CREATE INDEX transactions_cap ON transactions (agent_id, holds_cap, cap_at, amount_micros);
CREATE INDEX transactions_by_org ON transactions (org_id, created_at, id);
CREATE INDEX transactions_by_status ON transactions (status);

CREATE TABLE approvals (
  id             TEXT COLLATE "C" PRIMARY KEY,
  org_id         TEXT COLLATE "C" NOT NULL REFERENCES organizations(id),
  agent_id       TEXT COLLATE "C" NOT NULL REFERENCES agents(id),
  transaction_id TEXT COLLATE "C" NOT NULL UNIQUE REFERENCES transactions(id),
  status         TEXT COLLATE "C" NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
  created_at     BIGINT NOT NULL,
  expires_at     BIGINT NOT NULL,
  decided_at     BIGINT,
  decided_by     TEXT COLLATE "C" NOT NULL DEFAULT '',
  note           TEXT COLLATE "C" NOT NULL DEFAULT ''
);
CREATE INDEX approvals_by_org ON approvals (org_id, created_at);
CREATE INDEX approvals_pending ON approvals (status, expires_at);
CREATE INDEX approvals_agent_pending ON approvals (agent_id, status, expires_at);

-- Next account nonce per treasury and chain for raw transactions; bumped inside the reserving
-- transaction so a nonce can never be handed out twice.
CREATE TABLE account_nonces (
  org_id     TEXT COLLATE "C" NOT NULL REFERENCES organizations(id),
  chain_id   BIGINT NOT NULL,
  next_nonce BIGINT NOT NULL,
  PRIMARY KEY (org_id, chain_id)
);

CREATE TABLE settings (
  key   TEXT COLLATE "C" PRIMARY KEY,
  value TEXT COLLATE "C" NOT NULL
);
`;
