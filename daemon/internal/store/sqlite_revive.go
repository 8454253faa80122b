package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// sqliteAppendAttempt is the SQL that appends the JSON entry in param to
// attempt_log, keeping the newest entries.
func sqliteAppendAttempt(param string) string {
	return fmt.Sprintf("json_insert(CASE WHEN json_array_length(attempt_log) >= %d THEN json_remove(attempt_log, '$[0]') ELSE attempt_log END, '$[#]', json(%s))",
		dlq.MaxAttempts, param)
}

// rawPayload is what goes into raw_payload: NULL only for a message too
// large to keep whole (nil), an empty BLOB for an empty one.
func rawPayload(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

// ReviveDLQ implements dlq.Store.
func (s *SQLite) ReviveDLQ(ctx context.Context, id uuid.UUID, r dlq.Revive) (*dlq.Message, error) {
	m, err := scanSQLiteMessage(s.db.QueryRowContext(ctx, `
		UPDATE dlq_messages SET status = 'PENDING', retry_count = 0, max_retries = ?2, next_retry_at = ?3,
			lease_owner = NULL, lease_expires_at = NULL, updated_at = ?4, attempt_log = `+sqliteAppendAttempt("?5")+`
		WHERE id = ?1 AND status = 'DEAD' AND raw_payload IS NOT NULL
		RETURNING `+sqliteDLQColumns, id.String(), r.MaxRetries, usPtr(r.NextRetryAt), us(r.Now), attemptJSON(&r.Attempt)))
	if err == nil {
		return m, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("revive dead letter: %w", err)
	}
	cur, err := s.GetDLQ(ctx, id)
	if err != nil {
		return nil, err
	}
	return nil, dlq.NotRevivable(cur)
}
