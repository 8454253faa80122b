package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/idempotency"
)

// KeySQL is the SQL of idempotency.Store in one dialect
// (postgres/idempotency.go, sqlite/idempotency.go).
type KeySQL struct {
	// Reserve takes a key unless a live record holds it: (uid, key, route,
	// request hash, now, expires_at, stale before).
	Reserve  string
	Holder   string // (uid, key)
	Complete string // (uid, key, request hash, status, body, expires_at, headers)
	Release  string // (uid, key, request hash)
}

// KeyColumns is what holder selects, for ReserveIdempotencyKey.
const KeyColumns = `route, request_hash, state, response_status, response_body, response_headers, created_at, locked_at, expires_at`

// ReserveIdempotencyKey implements idempotency.Store.
func (s *Store) ReserveIdempotencyKey(ctx context.Context, rec idempotency.Record, now, staleBefore time.Time) (*idempotency.Record, error) {
	var holder *idempotency.Record
	err := s.conn.Tx(ctx, func(q Querier) error {
		holder = nil
		n, err := q.Exec(ctx, s.sql.Keys.Reserve, int64(rec.CallerUID), rec.Key, rec.Route, rec.RequestHash, now,
			rec.ExpiresAt, staleBefore)
		if err != nil {
			return fmt.Errorf("reserve idempotency key: %w", err)
		}
		if n == 1 {
			return nil
		}
		h := idempotency.Record{CallerUID: rec.CallerUID, Key: rec.Key}
		var (
			state   string
			status  *int
			headers *string
		)
		if err := q.QueryRow(ctx, s.sql.Keys.Holder, int64(rec.CallerUID), rec.Key).Scan(&h.Route, &h.RequestHash, &state,
			&status, &h.Response.Body, &headers, &h.CreatedAt, &h.LockedAt, &h.ExpiresAt); err != nil {
			return fmt.Errorf("read idempotency key: %w", err)
		}
		h.State = idempotency.State(state)
		if status != nil {
			h.Response.Status = *status
		}
		if headers != nil && *headers != "" {
			if err := json.Unmarshal([]byte(*headers), &h.Response.Headers); err != nil {
				return fmt.Errorf("read idempotency key headers: %w", err)
			}
		}
		holder = &h
		return nil
	})
	return holder, err
}

// CompleteIdempotencyKey implements idempotency.Store.
func (s *Store) CompleteIdempotencyKey(ctx context.Context, uid uint32, key, hash string, resp idempotency.Response, expiresAt time.Time) error {
	headers, err := json.Marshal(resp.Headers)
	if err != nil {
		return fmt.Errorf("encode idempotency key headers: %w", err)
	}
	if _, err := s.conn.Exec(ctx, s.sql.Keys.Complete, int64(uid), key, hash, resp.Status, nonNil(resp.Body), expiresAt, string(headers)); err != nil {
		return fmt.Errorf("complete idempotency key: %w", err)
	}
	return nil
}

// ReleaseIdempotencyKey implements idempotency.Store.
func (s *Store) ReleaseIdempotencyKey(ctx context.Context, uid uint32, key, hash string) error {
	if _, err := s.conn.Exec(ctx, s.sql.Keys.Release, int64(uid), key, hash); err != nil {
		return fmt.Errorf("release idempotency key: %w", err)
	}
	return nil
}
