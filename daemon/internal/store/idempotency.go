package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/idempotency"
)

// keySQL is the SQL of idempotency.Store in one dialect
// (postgres_idempotency.go, sqlite_idempotency.go).
type keySQL struct {
	// reserve takes a key unless a live record holds it: (uid, key, route,
	// request hash, now, expires_at, stale before).
	reserve  string
	holder   string // (uid, key)
	complete string // (uid, key, request hash, status, body, expires_at, headers)
	release  string // (uid, key, request hash)
}

// keyColumns is what holder selects, for ReserveIdempotencyKey.
const keyColumns = `route, request_hash, state, response_status, response_body, response_headers, created_at, locked_at, expires_at`

// ReserveIdempotencyKey implements idempotency.Store.
func (s *sqlStore) ReserveIdempotencyKey(ctx context.Context, rec idempotency.Record, now, staleBefore time.Time) (*idempotency.Record, error) {
	var holder *idempotency.Record
	err := s.db.tx(ctx, func(q querier) error {
		holder = nil
		n, err := q.exec(ctx, s.sql.keys.reserve, int64(rec.CallerUID), rec.Key, rec.Route, rec.RequestHash, now,
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
		if err := q.queryRow(ctx, s.sql.keys.holder, int64(rec.CallerUID), rec.Key).Scan(&h.Route, &h.RequestHash, &state,
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
func (s *sqlStore) CompleteIdempotencyKey(ctx context.Context, uid uint32, key, hash string, resp idempotency.Response, expiresAt time.Time) error {
	headers, err := json.Marshal(resp.Headers)
	if err != nil {
		return fmt.Errorf("encode idempotency key headers: %w", err)
	}
	if _, err := s.db.exec(ctx, s.sql.keys.complete, int64(uid), key, hash, resp.Status, nonNil(resp.Body), expiresAt, string(headers)); err != nil {
		return fmt.Errorf("complete idempotency key: %w", err)
	}
	return nil
}

// ReleaseIdempotencyKey implements idempotency.Store.
func (s *sqlStore) ReleaseIdempotencyKey(ctx context.Context, uid uint32, key, hash string) error {
	if _, err := s.db.exec(ctx, s.sql.keys.release, int64(uid), key, hash); err != nil {
		return fmt.Errorf("release idempotency key: %w", err)
	}
	return nil
}
