-- Bulk operations on dead letters; see postgres/015_dlq_operations.up.sql.
CREATE TABLE IF NOT EXISTS dlq_operations (
    id                  TEXT    PRIMARY KEY,
    action              TEXT    NOT NULL CHECK (action IN ('retry', 'revive', 'delete', 'dead', 'replay_to')),
    state               TEXT    NOT NULL CHECK (state IN ('RUNNING', 'COMPLETED', 'CANCELLED', 'FAILED')),
    filter              TEXT    NOT NULL DEFAULT '{}',
    target_topic        TEXT    NOT NULL DEFAULT '',
    rate                REAL    NOT NULL DEFAULT 0,
    matched             INTEGER NOT NULL DEFAULT 0,
    done                INTEGER NOT NULL DEFAULT 0,
    succeeded           INTEGER NOT NULL DEFAULT 0,
    failed              INTEGER NOT NULL DEFAULT 0,
    outcomes            TEXT    NOT NULL DEFAULT '{}',
    position            INTEGER NOT NULL DEFAULT 0,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    started_at          INTEGER,
    finished_at         INTEGER,
    requested_by_uid    INTEGER,
    cancel_requested_at INTEGER,
    cancelled_by_uid    INTEGER,
    lease_owner         TEXT,
    lease_expires_at    INTEGER,
    last_error          TEXT
);
CREATE INDEX IF NOT EXISTS idx_dlq_operations_created ON dlq_operations (created_at DESC, id DESC);

CREATE TABLE IF NOT EXISTS dlq_operation_items (
    operation_id TEXT    NOT NULL REFERENCES dlq_operations (id) ON DELETE CASCADE,
    seq          INTEGER NOT NULL,
    message_id   TEXT    NOT NULL,
    outcome      TEXT,
    error        TEXT,
    PRIMARY KEY (operation_id, seq)
) WITHOUT ROWID;
