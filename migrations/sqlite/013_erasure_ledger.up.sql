-- Erasure ledger and re-verification; see postgres/013_erasure_ledger.up.sql
-- for what the tables and columns mean.
CREATE TABLE erasure_ledger (
    job_id         TEXT    PRIMARY KEY,
    tenant_id      TEXT    NOT NULL,
    erased_at      INTEGER NOT NULL,
    receipt_sha256 TEXT    NOT NULL,
    source         TEXT    NOT NULL CHECK (source IN ('local', 'import')),
    recorded_at    INTEGER NOT NULL
);
CREATE INDEX idx_erasure_ledger_tenant ON erasure_ledger (tenant_id, erased_at DESC, job_id DESC);

CREATE TABLE erasure_resurrections (
    id             TEXT    PRIMARY KEY,
    tenant_id      TEXT    NOT NULL,
    erasure_job_id TEXT    NOT NULL,
    receipt_sha256 TEXT    NOT NULL,
    counts         TEXT    NOT NULL,
    found_at       INTEGER NOT NULL,
    last_seen_at   INTEGER NOT NULL,
    seen_count     INTEGER NOT NULL DEFAULT 1,
    resolved_at    INTEGER,
    action         TEXT    NOT NULL CHECK (action IN ('REPORTED', 'HELD', 'REERASE')),
    reerase_job_id TEXT
);
CREATE UNIQUE INDEX uq_erasure_resurrections_open ON erasure_resurrections (tenant_id) WHERE resolved_at IS NULL;
CREATE INDEX idx_erasure_resurrections_tenant ON erasure_resurrections (tenant_id, found_at DESC);
CREATE INDEX idx_erasure_resurrections_reerase ON erasure_resurrections (reerase_job_id) WHERE reerase_job_id IS NOT NULL;

CREATE TABLE erasure_reverify (
    name             TEXT    PRIMARY KEY,
    owner            TEXT,
    lease_expires_at INTEGER,
    last_started_at  INTEGER,
    last_finished_at INTEGER
);
INSERT INTO erasure_reverify (name) VALUES ('reverify');
