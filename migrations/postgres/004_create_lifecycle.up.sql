-- Tenant deletion jobs: one row per job, one row per deleter of a job.
CREATE TABLE IF NOT EXISTS lifecycle.deletion_jobs (
    id               UUID        PRIMARY KEY,
    tenant_id        TEXT        NOT NULL,
    status           VARCHAR(20) NOT NULL,
    attempts         INT         NOT NULL DEFAULT 0,
    verified         BOOLEAN     NOT NULL DEFAULT FALSE,
    last_error       TEXT,
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL,
    finished_at      TIMESTAMPTZ,
    next_attempt_at  TIMESTAMPTZ,
    lease_owner      TEXT,
    lease_expires_at TIMESTAMPTZ,
    CONSTRAINT chk_deletion_jobs_status CHECK (status IN ('PENDING', 'RUNNING', 'PARTIAL', 'COMPLETED'))
);
-- At most one active job per tenant: a second request returns the first.
CREATE UNIQUE INDEX IF NOT EXISTS uq_deletion_jobs_active ON lifecycle.deletion_jobs (tenant_id)
    WHERE status <> 'COMPLETED';
CREATE INDEX IF NOT EXISTS idx_deletion_jobs_tenant ON lifecycle.deletion_jobs (tenant_id, created_at DESC);
CREATE INDEX IF NOT EXISTS idx_deletion_jobs_due ON lifecycle.deletion_jobs (next_attempt_at)
    WHERE status <> 'COMPLETED';

CREATE TABLE IF NOT EXISTS lifecycle.deletion_job_deleters (
    job_id        UUID        NOT NULL REFERENCES lifecycle.deletion_jobs (id) ON DELETE CASCADE,
    deleter       TEXT        NOT NULL,
    status        VARCHAR(20) NOT NULL,
    deleted_count BIGINT      NOT NULL DEFAULT 0,
    -- What Count found before the first attempt: the progress bar's total,
    -- and the base for an exact count after an interrupted attempt.
    initial_count BIGINT,
    attempts      INT         NOT NULL DEFAULT 0,
    error         TEXT,
    updated_at    TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (job_id, deleter),
    CONSTRAINT chk_deletion_job_deleters_status CHECK (status IN ('PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED'))
);

-- Idempotency-Key records, scoped by the caller's uid.
CREATE TABLE IF NOT EXISTS lifecycle.idempotency_keys (
    caller_uid      BIGINT      NOT NULL,
    key             TEXT        NOT NULL,
    route           TEXT        NOT NULL,
    request_hash    TEXT        NOT NULL,
    state           VARCHAR(20) NOT NULL,
    response_status INT,
    response_body   BYTEA,
    created_at      TIMESTAMPTZ NOT NULL,
    locked_at       TIMESTAMPTZ NOT NULL,
    expires_at      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (caller_uid, key),
    CONSTRAINT chk_idempotency_state CHECK (state IN ('IN_FLIGHT', 'DONE'))
);
CREATE INDEX IF NOT EXISTS idx_idempotency_expires ON lifecycle.idempotency_keys (expires_at);
