CREATE TABLE IF NOT EXISTS deletion_jobs (
    id               TEXT    PRIMARY KEY,
    tenant_id        TEXT    NOT NULL,
    status           TEXT    NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    verified         INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    finished_at      INTEGER,
    next_attempt_at  INTEGER,
    lease_owner      TEXT,
    lease_expires_at INTEGER,
    CHECK (status IN ('PENDING', 'RUNNING', 'PARTIAL', 'COMPLETED'))
);
CREATE UNIQUE INDEX IF NOT EXISTS uq_deletion_jobs_active ON deletion_jobs (tenant_id) WHERE status <> 'COMPLETED';
CREATE INDEX IF NOT EXISTS idx_deletion_jobs_tenant ON deletion_jobs (tenant_id, created_at DESC);
CREATE INDEX IF NOT EXISTS idx_deletion_jobs_due ON deletion_jobs (next_attempt_at) WHERE status <> 'COMPLETED';

CREATE TABLE IF NOT EXISTS deletion_job_deleters (
    job_id        TEXT    NOT NULL REFERENCES deletion_jobs (id) ON DELETE CASCADE,
    deleter       TEXT    NOT NULL,
    status        TEXT    NOT NULL,
    deleted_count INTEGER NOT NULL DEFAULT 0,
    initial_count INTEGER,
    attempts      INTEGER NOT NULL DEFAULT 0,
    error         TEXT,
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (job_id, deleter),
    CHECK (status IN ('PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED'))
);

CREATE TABLE IF NOT EXISTS idempotency_keys (
    caller_uid      INTEGER NOT NULL,
    key             TEXT    NOT NULL,
    route           TEXT    NOT NULL,
    request_hash    TEXT    NOT NULL,
    state           TEXT    NOT NULL,
    response_status INTEGER,
    response_body   BLOB,
    created_at      INTEGER NOT NULL,
    locked_at       INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    PRIMARY KEY (caller_uid, key),
    CHECK (state IN ('IN_FLIGHT', 'DONE'))
);
CREATE INDEX IF NOT EXISTS idx_idempotency_expires ON idempotency_keys (expires_at);
