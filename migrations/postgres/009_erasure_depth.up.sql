-- Erasure depth (issue 14): scheduled and cancelled jobs, who asked, legal
-- holds, signed erasure receipts and the keys that signed them.

-- SCHEDULED: waits until not_before (grace period). CANCELLED: stopped by an
-- operator; terminal like COMPLETED, never claimed again.
ALTER TABLE lifecycle.deletion_jobs DROP CONSTRAINT IF EXISTS chk_deletion_jobs_status;
ALTER TABLE lifecycle.deletion_jobs ADD CONSTRAINT chk_deletion_jobs_status
    CHECK (status IN ('SCHEDULED', 'PENDING', 'RUNNING', 'PARTIAL', 'COMPLETED', 'CANCELLED'));
ALTER TABLE lifecycle.deletion_jobs
    ADD COLUMN IF NOT EXISTS not_before          TIMESTAMPTZ,
    -- The first time a runner claimed the job (the receipt's start).
    ADD COLUMN IF NOT EXISTS started_at          TIMESTAMPTZ,
    ADD COLUMN IF NOT EXISTS requested_by_uid    BIGINT,
    -- Set when an operator cancels: a job with it is never claimed again,
    -- and a runner that holds it stops at the next batch boundary.
    ADD COLUMN IF NOT EXISTS cancel_requested_at TIMESTAMPTZ,
    ADD COLUMN IF NOT EXISTS cancelled_by_uid    BIGINT;

-- One active job per tenant: CANCELLED is finished too.
DROP INDEX IF EXISTS lifecycle.uq_deletion_jobs_active;
CREATE UNIQUE INDEX uq_deletion_jobs_active ON lifecycle.deletion_jobs (tenant_id)
    WHERE status NOT IN ('COMPLETED', 'CANCELLED');
DROP INDEX IF EXISTS lifecycle.idx_deletion_jobs_due;
CREATE INDEX idx_deletion_jobs_due ON lifecycle.deletion_jobs (next_attempt_at)
    WHERE status NOT IN ('COMPLETED', 'CANCELLED');
-- Job lists, newest first, by keyset.
CREATE INDEX IF NOT EXISTS idx_deletion_jobs_created ON lifecycle.deletion_jobs (created_at DESC, id DESC);
-- max_jobs counts live leases at every claim.
CREATE INDEX IF NOT EXISTS idx_deletion_jobs_running ON lifecycle.deletion_jobs (lease_expires_at)
    WHERE status = 'RUNNING';

-- A deleter stopped by a cancel keeps what it deleted under CANCELLED.
ALTER TABLE lifecycle.deletion_job_deleters DROP CONSTRAINT IF EXISTS chk_deletion_job_deleters_status;
ALTER TABLE lifecycle.deletion_job_deleters ADD CONSTRAINT chk_deletion_job_deleters_status
    CHECK (status IN ('PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED'));

-- Legal holds: one row per hold, kept after its release (the history).
CREATE TABLE IF NOT EXISTS lifecycle.tenant_holds (
    id              UUID        PRIMARY KEY,
    tenant_id       TEXT        NOT NULL,
    reason          TEXT        NOT NULL,
    held_at         TIMESTAMPTZ NOT NULL,
    held_by_uid     BIGINT,
    released_at     TIMESTAMPTZ,
    released_by_uid BIGINT
);
CREATE UNIQUE INDEX IF NOT EXISTS uq_tenant_holds_active ON lifecycle.tenant_holds (tenant_id)
    WHERE released_at IS NULL;
CREATE INDEX IF NOT EXISTS idx_tenant_holds_held_at ON lifecycle.tenant_holds (held_at DESC, id DESC);

-- The signed receipt of a COMPLETED and verified job, byte for byte as issued.
CREATE TABLE IF NOT EXISTS lifecycle.deletion_receipts (
    job_id    UUID        PRIMARY KEY REFERENCES lifecycle.deletion_jobs (id) ON DELETE CASCADE,
    key_id    TEXT        NOT NULL,
    body      BYTEA       NOT NULL,
    issued_at TIMESTAMPTZ NOT NULL
);

-- Every public key a daemon of this store signed with, so that a receipt
-- verifies against the key that signed it after a rotation, and whichever
-- daemon of several issued it.
CREATE TABLE IF NOT EXISTS lifecycle.receipt_keys (
    key_id        TEXT        PRIMARY KEY,
    algorithm     TEXT        NOT NULL,
    public_key    BYTEA       NOT NULL,
    registered_at TIMESTAMPTZ NOT NULL
);
