package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// ReviveDLQ implements dlq.Store: one statement moves a DEAD message that
// was kept whole back to PENDING and records the revive in its history.
func (p *Postgres) ReviveDLQ(ctx context.Context, id uuid.UUID, r dlq.Revive) (*dlq.Message, error) {
	m, err := retryConflicts(func() (*dlq.Message, error) {
		return scanPGMessage(p.pool.QueryRow(ctx, `
		UPDATE dlq.dlq_messages SET status = 'PENDING', retry_count = 0, max_retries = $2, next_retry_at = $3,
			lease_owner = NULL, lease_expires_at = NULL, updated_at = $4, attempt_log = `+pgAppendAttempt("", "$5")+`
		WHERE id = $1 AND status = 'DEAD' AND raw_payload IS NOT NULL
		RETURNING `+pgDLQColumns, id, r.MaxRetries, r.NextRetryAt, r.Now, attemptJSON(&r.Attempt)))
	})
	if err == nil {
		return m, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("revive dead letter: %w", err)
	}
	cur, err := p.GetDLQ(ctx, id)
	if err != nil {
		return nil, err
	}
	return nil, dlq.NotRevivable(cur)
}
