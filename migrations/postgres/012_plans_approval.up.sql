-- Deletion plans and approval (issue 16, items 1 and 2).
--
-- A job is held to a plan: plan_hash names the plan (deleters, their
-- fingerprints, the targets and the ways they are reached, not the counts)
-- that was current when the job was created, or that an approver approved.
-- The runner recomputes the plan at every start and refuses to delete when
-- it differs.
--
-- A job waiting for approval is stored as SCHEDULED with approval_pending
-- set and no next_attempt_at (so no runner claims it), and read back as
-- AWAITING_APPROVAL: SQLite cannot change the status CHECK without
-- rebuilding deletion_jobs and every table that references it, and both
-- stores keep one representation.
ALTER TABLE lifecycle.deletion_jobs
    ADD COLUMN IF NOT EXISTS plan_hash          TEXT,
    ADD COLUMN IF NOT EXISTS approval_required  BOOLEAN NOT NULL DEFAULT FALSE,
    ADD COLUMN IF NOT EXISTS approval_pending   BOOLEAN NOT NULL DEFAULT FALSE,
    ADD COLUMN IF NOT EXISTS approved_at        TIMESTAMPTZ,
    ADD COLUMN IF NOT EXISTS approved_by_uid    BIGINT,
    -- Set when the runner found the plan changed (or unplannable) and sent
    -- the job back for approval: what changed, for the operator.
    ADD COLUMN IF NOT EXISTS plan_drift         TEXT;

-- Plan structures by hash: one row per distinct plan, shared by every job
-- held to it (a bulk request of 10,000 tenants stores one). Kept so that a
-- runner can name what changed, not only that something did.
CREATE TABLE IF NOT EXISTS lifecycle.deletion_plans (
    plan_hash     TEXT        PRIMARY KEY,
    body          JSONB       NOT NULL,
    first_seen_at TIMESTAMPTZ NOT NULL
);
