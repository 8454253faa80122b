-- Erasure ledger and re-verification (issue 16, items 4 and 5).

-- One row per COMPLETED and verified erasure, written in the transaction
-- that completes the job (or imported from a signed ledger file after the
-- state store itself was restored). Kept when the job row is gone: the
-- ledger is what re-verification reads, so no foreign key to the job.
CREATE TABLE IF NOT EXISTS lifecycle.erasure_ledger (
    job_id         UUID        PRIMARY KEY,
    tenant_id      TEXT        NOT NULL,
    erased_at      TIMESTAMPTZ NOT NULL,
    -- "sha256:<hex>" of the receipt's bytes as issued; '' when none was.
    receipt_sha256 TEXT        NOT NULL,
    -- local: written by a job here; import: read from a ledger file.
    source         TEXT        NOT NULL CHECK (source IN ('local', 'import')),
    recorded_at    TIMESTAMPTZ NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_erasure_ledger_tenant ON lifecycle.erasure_ledger (tenant_id, erased_at DESC, job_id DESC);

-- A ledger tenant that re-verification found data of again. One open row
-- per tenant (resolved_at NULL) until a pass counts zero everywhere.
CREATE TABLE IF NOT EXISTS lifecycle.erasure_resurrections (
    id             UUID        PRIMARY KEY,
    tenant_id      TEXT        NOT NULL,
    -- The erasure the data came back after: its job and receipt hash.
    erasure_job_id UUID        NOT NULL,
    receipt_sha256 TEXT        NOT NULL,
    -- What the last pass counted, per deleter (non-zero ones only).
    counts         JSONB       NOT NULL,
    found_at       TIMESTAMPTZ NOT NULL,
    last_seen_at   TIMESTAMPTZ NOT NULL,
    seen_count     INT         NOT NULL DEFAULT 1,
    resolved_at    TIMESTAMPTZ,
    -- REPORTED: reerase is off; HELD: the tenant is on legal hold;
    -- REERASE: a job erases it again (reerase_job_id).
    action         TEXT        NOT NULL CHECK (action IN ('REPORTED', 'HELD', 'REERASE')),
    reerase_job_id UUID
);
CREATE UNIQUE INDEX IF NOT EXISTS uq_erasure_resurrections_open ON lifecycle.erasure_resurrections (tenant_id)
    WHERE resolved_at IS NULL;
CREATE INDEX IF NOT EXISTS idx_erasure_resurrections_tenant ON lifecycle.erasure_resurrections (tenant_id, found_at DESC);
CREATE INDEX IF NOT EXISTS idx_erasure_resurrections_reerase ON lifecycle.erasure_resurrections (reerase_job_id)
    WHERE reerase_job_id IS NOT NULL;

-- The re-verification lease: one pass per interval across every daemon of
-- the store, run by whichever daemon takes the lease.
CREATE TABLE IF NOT EXISTS lifecycle.erasure_reverify (
    name             TEXT        PRIMARY KEY,
    owner            TEXT,
    lease_expires_at TIMESTAMPTZ,
    last_started_at  TIMESTAMPTZ,
    last_finished_at TIMESTAMPTZ
);
INSERT INTO lifecycle.erasure_reverify (name) VALUES ('reverify') ON CONFLICT DO NOTHING;
