-- Bulk operations on dead letters (issue 13, item 3).
--
-- dlq_operations: one row per operation, leased like a deletion job so it
-- survives a restart and runs on one daemon at a time. position is the seq
-- of the last item done: the counters and position move in the transaction
-- that records the items' outcomes, so a restart resumes exactly after the
-- last page recorded.
CREATE TABLE IF NOT EXISTS dlq.dlq_operations (
    id                  UUID        PRIMARY KEY,
    action              TEXT        NOT NULL CHECK (action IN ('retry', 'revive', 'delete', 'dead', 'replay_to')),
    state               TEXT        NOT NULL CHECK (state IN ('RUNNING', 'COMPLETED', 'CANCELLED', 'FAILED')),
    filter              JSONB       NOT NULL DEFAULT '{}',
    target_topic        TEXT        NOT NULL DEFAULT '',
    rate                DOUBLE PRECISION NOT NULL DEFAULT 0,
    matched             BIGINT      NOT NULL DEFAULT 0,
    done                BIGINT      NOT NULL DEFAULT 0,
    succeeded           BIGINT      NOT NULL DEFAULT 0,
    failed              BIGINT      NOT NULL DEFAULT 0,
    outcomes            JSONB       NOT NULL DEFAULT '{}',
    position            BIGINT      NOT NULL DEFAULT 0,
    created_at          TIMESTAMPTZ NOT NULL,
    updated_at          TIMESTAMPTZ NOT NULL,
    started_at          TIMESTAMPTZ,
    finished_at         TIMESTAMPTZ,
    requested_by_uid    BIGINT,
    cancel_requested_at TIMESTAMPTZ,
    cancelled_by_uid    BIGINT,
    lease_owner         TEXT,
    lease_expires_at    TIMESTAMPTZ,
    last_error          TEXT
);
CREATE INDEX IF NOT EXISTS idx_dlq_operations_created ON dlq.dlq_operations (created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS idx_dlq_operations_running ON dlq.dlq_operations (lease_expires_at) WHERE state = 'RUNNING';

-- The set an operation works on, fixed when it starts: later arrivals are
-- not swept in. outcome and error are written for the items that failed.
CREATE TABLE IF NOT EXISTS dlq.dlq_operation_items (
    operation_id UUID   NOT NULL REFERENCES dlq.dlq_operations (id) ON DELETE CASCADE,
    seq          BIGINT NOT NULL,
    message_id   UUID   NOT NULL,
    outcome      TEXT,
    error        TEXT,
    PRIMARY KEY (operation_id, seq)
);
