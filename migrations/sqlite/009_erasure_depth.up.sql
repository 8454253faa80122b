-- Erasure depth; see postgres/009_erasure_depth.up.sql for what the columns
-- and tables mean. SQLite cannot change a CHECK constraint, so both job
-- tables are rebuilt. The deleters are first copied aside without their
-- foreign key: dropping deletion_jobs while a table references it would
-- cascade into that table's rows.
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
    CHECK (status IN ('SCHEDULED', 'PENDING', 'RUNNING', 'PARTIAL', 'COMPLETED', 'CANCELLED'))
);
INSERT INTO deletion_jobs_new SELECT *, NULL, NULL, NULL, NULL, NULL FROM deletion_jobs;
DROP TABLE deletion_jobs;
ALTER TABLE deletion_jobs_new RENAME TO deletion_jobs;
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
    CHECK (status IN ('PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED'))
);
INSERT INTO deletion_job_deleters SELECT * FROM deletion_job_deleters_copy;
DROP TABLE deletion_job_deleters_copy;

CREATE TABLE tenant_holds (
    id              TEXT    PRIMARY KEY,
    tenant_id       TEXT    NOT NULL,
    reason          TEXT    NOT NULL,
    held_at         INTEGER NOT NULL,
    held_by_uid     INTEGER,
    released_at     INTEGER,
    released_by_uid INTEGER
);
CREATE UNIQUE INDEX uq_tenant_holds_active ON tenant_holds (tenant_id) WHERE released_at IS NULL;
CREATE INDEX idx_tenant_holds_held_at ON tenant_holds (held_at DESC, id DESC);

CREATE TABLE deletion_receipts (
    job_id    TEXT    PRIMARY KEY REFERENCES deletion_jobs (id) ON DELETE CASCADE,
    key_id    TEXT    NOT NULL,
    body      BLOB    NOT NULL,
    issued_at INTEGER NOT NULL
);

CREATE TABLE receipt_keys (
    key_id        TEXT    PRIMARY KEY,
    algorithm     TEXT    NOT NULL,
    public_key    BLOB    NOT NULL,
    registered_at INTEGER NOT NULL
);
