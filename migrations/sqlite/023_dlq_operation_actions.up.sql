-- No CHECK on a bulk operation's action; see postgres/023. SQLite cannot
-- drop a constraint, so dlq_operations is rebuilt without it (as in 014).
-- Its items reference it ON DELETE CASCADE: dropping the table (an
-- implicit DELETE with foreign keys on) would delete every item, so they
-- are copied aside and back, and their table made again to reference the
-- new one.
CREATE TABLE dlq_operation_items_copy AS SELECT * FROM dlq_operation_items;
DROP TABLE dlq_operation_items;

CREATE TABLE dlq_operations_new (
    id                  TEXT    PRIMARY KEY,
    action              TEXT    NOT NULL,
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
    last_error          TEXT,
    -- 018_dlq_operation_ranges's column: SELECT * below copies every column in order.
    done_ranges         TEXT    NOT NULL DEFAULT '[]'
);
INSERT INTO dlq_operations_new SELECT * FROM dlq_operations;
DROP TABLE dlq_operations;
ALTER TABLE dlq_operations_new RENAME TO dlq_operations;
CREATE INDEX idx_dlq_operations_created ON dlq_operations (created_at DESC, id DESC);

CREATE TABLE dlq_operation_items (
    operation_id   TEXT    NOT NULL REFERENCES dlq_operations (id) ON DELETE CASCADE,
    seq            INTEGER NOT NULL,
    message_id     TEXT    NOT NULL,
    outcome        TEXT,
    error          TEXT,
    -- 020_dlq_operation_items_answered's columns, in order.
    answered       TEXT,
    answered_error TEXT,
    PRIMARY KEY (operation_id, seq)
) WITHOUT ROWID;
INSERT INTO dlq_operation_items SELECT * FROM dlq_operation_items_copy;
DROP TABLE dlq_operation_items_copy;
CREATE INDEX idx_dlq_operation_items_answered ON dlq_operation_items (operation_id, seq)
    WHERE answered IS NOT NULL;
