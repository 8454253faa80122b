-- BLOCKED jobs and deleters; see postgres/014_blocked_jobs.up.sql. SQLite
-- cannot change a CHECK constraint, so both job tables are rebuilt (the
-- deleters copied aside first, as in 009).
CREATE TABLE deletion_job_deleters_copy AS SELECT * FROM deletion_job_deleters;
DROP TABLE deletion_job_deleters;

CREATE TABLE deletion_jobs_new (
    id                  TEXT    PRIMARY KEY,
    tenant_id           TEXT    NOT NULL,
    status              TEXT    NOT NULL,
    attempts            INTEGER NOT NULL DEFAULT 0,
    verified            INTEGER NOT NULL DEFAULT 0,
    last_error          TEXT,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    finished_at         INTEGER,
    next_attempt_at     INTEGER,
    lease_owner         TEXT,
    lease_expires_at    INTEGER,
    not_before          INTEGER,
    started_at          INTEGER,
    requested_by_uid    INTEGER,
    cancel_requested_at INTEGER,
    cancelled_by_uid    INTEGER,
    -- 012_plans_approval's columns: SELECT * below copies every column in order.
    plan_hash           TEXT,
    approval_required   INTEGER NOT NULL DEFAULT 0,
    approval_pending    INTEGER NOT NULL DEFAULT 0,
    approved_at         INTEGER,
    approved_by_uid     INTEGER,
    plan_drift          TEXT,
    CHECK (status IN ('SCHEDULED', 'PENDING', 'RUNNING', 'PARTIAL', 'BLOCKED', 'COMPLETED', 'CANCELLED'))
);
INSERT INTO deletion_jobs_new SELECT * FROM deletion_jobs;
-- Receipts reference deletion_jobs ON DELETE CASCADE: dropping the table
-- (an implicit DELETE with foreign keys on) would delete every receipt.
-- They are copied aside and back like the deleters.
CREATE TABLE deletion_receipts_copy AS SELECT * FROM deletion_receipts;
DROP TABLE deletion_receipts;
DROP TABLE deletion_jobs;
ALTER TABLE deletion_jobs_new RENAME TO deletion_jobs;
CREATE TABLE deletion_receipts (
    job_id    TEXT    PRIMARY KEY REFERENCES deletion_jobs (id) ON DELETE CASCADE,
    key_id    TEXT    NOT NULL,
    body      BLOB    NOT NULL,
    issued_at INTEGER NOT NULL
);
INSERT INTO deletion_receipts SELECT * FROM deletion_receipts_copy;
DROP TABLE deletion_receipts_copy;
CREATE UNIQUE INDEX uq_deletion_jobs_active ON deletion_jobs (tenant_id) WHERE status NOT IN ('COMPLETED', 'CANCELLED');
CREATE INDEX idx_deletion_jobs_tenant ON deletion_jobs (tenant_id, created_at DESC);
CREATE INDEX idx_deletion_jobs_due ON deletion_jobs (next_attempt_at) WHERE status NOT IN ('COMPLETED', 'CANCELLED');
CREATE INDEX idx_deletion_jobs_created ON deletion_jobs (created_at DESC, id DESC);
CREATE INDEX idx_deletion_jobs_running ON deletion_jobs (lease_expires_at) WHERE status = 'RUNNING';

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
    CHECK (status IN ('PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'BLOCKED', 'CANCELLED'))
);
INSERT INTO deletion_job_deleters SELECT * FROM deletion_job_deleters_copy;
DROP TABLE deletion_job_deleters_copy;

