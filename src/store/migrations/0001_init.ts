import type { Migration } from './migration.js';

/**
 * Initial schema. Times are integer milliseconds since the Unix epoch; USD amounts are integer
 * micro-dollars; token amounts are decimal TEXT: no amount is ever stored or summed as a float.
 *
 * PostgreSQL: the same tables, columns, constraints and indexes. SQLite INTEGER (64-bit) is
 * BIGINT, BLOB is BYTEA, TEXT is TEXT COLLATE "C" (bytewise, as SQLite orders and compares text,
 * whatever the database's locale: keyset pages by id rely on it). PostgreSQL types are strict like
 * SQLite's STRICT tables. Never edit once landed: add the next migration.
 */

const sqlite = `
CREATE TABLE organizations (
  id                TEXT PRIMARY KEY,
  name              TEXT NOT NULL,
  approval_window_s INTEGER NOT NULL,
  created_at        INTEGER NOT NULL
) STRICT;

CREATE TABLE treasuries (
  org_id         TEXT PRIMARY KEY REFERENCES organizations(id),
  address        TEXT NOT NULL,
  key_ciphertext BLOB NOT NULL,
  created_at     INTEGER NOT NULL
) STRICT;

CREATE TABLE api_keys (
  id         TEXT PRIMARY KEY,
  org_id     TEXT NOT NULL REFERENCES organizations(id),
  mode       TEXT NOT NULL CHECK (mode IN ('live', 'test')),
  prefix     TEXT NOT NULL,
  key_hash   BLOB NOT NULL UNIQUE,
  label      TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  revoked_at INTEGER
) STRICT;
CREATE INDEX api_keys_by_org ON api_keys (org_id, created_at);

CREATE TABLE agents (
  id           TEXT PRIMARY KEY,
  org_id       TEXT NOT NULL REFERENCES organizations(id),
  name         TEXT NOT NULL,
  status       TEXT NOT NULL CHECK (status IN ('active', 'paused', 'revoked')),
  created_at   INTEGER NOT NULL,
  updated_at   INTEGER NOT NULL,
  last_ping_at INTEGER
) STRICT;
CREATE INDEX agents_by_org ON agents (org_id, created_at);

CREATE TABLE policies (
  agent_id                  TEXT PRIMARY KEY REFERENCES agents(id),
  allowlist                 TEXT NOT NULL,
  spend_cap_micros          INTEGER NOT NULL CHECK (spend_cap_micros >= 0),
  approval_threshold_micros INTEGER NOT NULL CHECK (approval_threshold_micros >= 0),
  updated_at                INTEGER NOT NULL
) STRICT;

CREATE TABLE services (
  id              TEXT PRIMARY KEY,
  slug            TEXT NOT NULL UNIQUE,
  name            TEXT NOT NULL,
  description     TEXT NOT NULL,
  category        TEXT NOT NULL,
  logo_url        TEXT NOT NULL,
  docs_url        TEXT NOT NULL,
  payment_methods TEXT NOT NULL,
  endpoints       TEXT NOT NULL,
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL
) STRICT;

-- holds_cap is 1 while the row counts against the agent's rolling spend cap (signing, signed,
-- pending approval); cap_at is when its amount started counting (the request, or the approval
-- that signed it). The covering index lets the cap sum read only the index.
CREATE TABLE transactions (
  id              TEXT PRIMARY KEY,
  org_id          TEXT NOT NULL REFERENCES organizations(id),
  agent_id        TEXT NOT NULL REFERENCES agents(id),
  type            TEXT NOT NULL,
  status          TEXT NOT NULL,
  chain_id        INTEGER NOT NULL DEFAULT 0,
  recipient       TEXT NOT NULL DEFAULT '',
  amount_micros   INTEGER NOT NULL CHECK (amount_micros >= 0),
  holds_cap       INTEGER NOT NULL DEFAULT 0 CHECK (holds_cap IN (0, 1)),
  cap_at          INTEGER NOT NULL,
  reason          TEXT NOT NULL DEFAULT '',
  service_slug    TEXT NOT NULL DEFAULT '',
  resource_url    TEXT NOT NULL DEFAULT '',
  idempotency_key TEXT,
  request_hash    TEXT,
  request         TEXT,
  result          TEXT,
  approval_id     TEXT,
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX transactions_idempotency ON transactions (agent_id, idempotency_key)
  WHERE idempotency_key IS NOT NULL;
CREATE INDEX transactions_cap ON transactions (agent_id, holds_cap, cap_at, amount_micros);
CREATE INDEX transactions_by_org ON transactions (org_id, created_at, id);
CREATE INDEX transactions_by_status ON transactions (status);

CREATE TABLE approvals (
  id             TEXT PRIMARY KEY,
  org_id         TEXT NOT NULL REFERENCES organizations(id),
  agent_id       TEXT NOT NULL REFERENCES agents(id),
  transaction_id TEXT NOT NULL UNIQUE REFERENCES transactions(id),
  status         TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
  created_at     INTEGER NOT NULL,
  expires_at     INTEGER NOT NULL,
  decided_at     INTEGER,
  decided_by     TEXT NOT NULL DEFAULT '',
  note           TEXT NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX approvals_by_org ON approvals (org_id, created_at);
CREATE INDEX approvals_pending ON approvals (status, expires_at);
CREATE INDEX approvals_agent_pending ON approvals (agent_id, status, expires_at);

-- Next account nonce per treasury and chain for raw transactions; bumped inside the reserving
-- transaction so a nonce can never be handed out twice.
CREATE TABLE account_nonces (
  org_id     TEXT NOT NULL REFERENCES organizations(id),
  chain_id   INTEGER NOT NULL,
  next_nonce INTEGER NOT NULL,
  PRIMARY KEY (org_id, chain_id)
) STRICT;

CREATE TABLE settings (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
) STRICT;
`;

const postgres = `
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

export const migration: Migration = { version: 1, name: 'init', sqlite, postgres };
