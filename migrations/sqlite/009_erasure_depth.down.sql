-- Refuses (the old CHECK constraints fail) while SCHEDULED or CANCELLED jobs
-- or CANCELLED deleters exist: an older lifecycled would run a cancelled
-- job. Delete or finish them first.
DROP TABLE receipt_keys;
DROP TABLE deletion_receipts;
DROP TABLE tenant_holds;

CREATE TABLE deletion_job_deleters_copy AS SELECT * FROM deletion_job_deleters;
DROP TABLE deletion_job_deleters;

CREATE TABLE deletion_jobs_old (
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
INSERT INTO deletion_jobs_old SELECT id, tenant_id, status, attempts, verified, last_error, created_at, updated_at,
    finished_at, next_attempt_at, lease_owner, lease_expires_at FROM deletion_jobs;
DROP TABLE deletion_jobs;
ALTER TABLE deletion_jobs_old RENAME TO deletion_jobs;
CREATE UNIQUE INDEX uq_deletion_jobs_active ON deletion_jobs (tenant_id) WHERE status <> 'COMPLETED';
CREATE INDEX idx_deletion_jobs_tenant ON deletion_jobs (tenant_id, created_at DESC);
CREATE INDEX idx_deletion_jobs_due ON deletion_jobs (next_attempt_at) WHERE status <> 'COMPLETED';

CREATE TABLE deletion_job_deleters (
    job_id        TEXT    NOT NULL REFERENCES deletion_jobs (id) ON DELETE CASCADE,
    deleter       TEXT    NOT NULL,
    status        TEXT    NOT NULL,
    deleted_count INTEGER NOT NULL DEFAULT 0,
    initial_count INTEGER,
    attempts      INTEGER NOT NULL DEFAULT 0,
    error         TEXT,
    updated_at    INTEGER NOT NULL,
    breakdown     TEXT,
    verification  TEXT,
    PRIMARY KEY (job_id, deleter),
    CHECK (status IN ('PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED'))
);
INSERT INTO deletion_job_deleters SELECT * FROM deletion_job_deleters_copy;
DROP TABLE deletion_job_deleters_copy;
