-- Deletion plans and approval; see postgres/012_plans_approval.up.sql for
-- what the columns mean and why a job waiting for approval is stored as
-- SCHEDULED with approval_pending set.
ALTER TABLE deletion_jobs ADD COLUMN plan_hash TEXT;
ALTER TABLE deletion_jobs ADD COLUMN approval_required INTEGER NOT NULL DEFAULT 0;
ALTER TABLE deletion_jobs ADD COLUMN approval_pending INTEGER NOT NULL DEFAULT 0;
ALTER TABLE deletion_jobs ADD COLUMN approved_at INTEGER;
ALTER TABLE deletion_jobs ADD COLUMN approved_by_uid INTEGER;
ALTER TABLE deletion_jobs ADD COLUMN plan_drift TEXT;

CREATE TABLE deletion_plans (
    plan_hash     TEXT    PRIMARY KEY,
    body          TEXT    NOT NULL,
    first_seen_at INTEGER NOT NULL
);
