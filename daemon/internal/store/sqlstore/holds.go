package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
)

// HoldSQL is the SQL of deletion.HoldStore in one dialect
// (postgres/holds.go, sqlite/holds.go).
type HoldSQL struct {
	Place   string // unless the tenant is held: (id, tenant, reason, now, uid)
	Release string // (tenant, uid, now) -> the hold
	Active  string // (tenant)
	// List: (include released, tenant or "", cursor time, cursor id, limit)
	List string
}

const HoldColumns = `id, tenant_id, reason, held_at, held_by_uid, released_at, released_by_uid`

func scanHold(row Scanner) (*deletion.Hold, error) {
	var h deletion.Hold
	if err := row.Scan(&h.ID, &h.TenantID, &h.Reason, &h.HeldAt, &h.HeldByUID, &h.ReleasedAt, &h.ReleasedByUID); err != nil {
		return nil, err
	}
	return &h, nil
}

// PlaceHold implements deletion.HoldStore.
func (s *Store) PlaceHold(ctx context.Context, tenant, reason string, uid *int64, now time.Time) (*deletion.Hold, bool, error) {
	var (
		hold    *deletion.Hold
		created bool
	)
	err := s.conn.Tx(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, s.sql.Holds.Place, newID(), tenant, reason, now, uid)
		if err != nil {
			return err
		}
		created = n == 1
		hold, err = scanHold(q.QueryRow(ctx, s.sql.Holds.Active, tenant))
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("hold tenant %q: %w", tenant, err)
	}
	return hold, created, nil
}

// ReleaseHold implements deletion.HoldStore.
func (s *Store) ReleaseHold(ctx context.Context, tenant string, uid *int64, now time.Time) (*deletion.Hold, error) {
	h, err := scanHold(s.conn.QueryRow(ctx, s.sql.Holds.Release, tenant, uid, now))
	if err != nil {
		return nil, fmt.Errorf("release the hold on tenant %q: %w", tenant, holdNotFound(err, tenant))
	}
	return h, nil
}

// ActiveHold implements deletion.HoldStore.
func (s *Store) ActiveHold(ctx context.Context, tenant string) (*deletion.Hold, error) {
	h, err := scanHold(s.conn.QueryRow(ctx, s.sql.Holds.Active, tenant))
	if err != nil {
		return nil, holdNotFound(err, tenant)
	}
	return h, nil
}

func holdNotFound(err error, tenant string) error {
	if errors.Is(err, derrors.ErrNotFound) {
		return fmt.Errorf("%w: tenant %s is not on hold", derrors.ErrNotFound, tenant)
	}
	return err
}

// ListHolds implements deletion.HoldStore.
func (s *Store) ListHolds(ctx context.Context, f deletion.HoldFilter) ([]*deletion.Hold, error) {
	var (
		afterAt *time.Time
		afterID = uuid.Nil
	)
	if f.After != nil {
		afterAt, afterID = &f.After.At, f.After.ID
	}
	hs, err := QueryAll(ctx, s.conn, scanHold, s.sql.Holds.List, f.IncludeReleased, f.Tenant, afterAt, afterID, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("list holds: %w", err)
	}
	return hs, nil
}
