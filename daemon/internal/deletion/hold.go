package deletion

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
)

// Hold is a legal hold on a tenant: while it is active (not released), no
// deletion of the tenant starts and its unfinished job waits.
type Hold struct {
	ID            uuid.UUID
	TenantID      string
	Reason        string
	HeldAt        time.Time
	HeldByUID     *int64
	ReleasedAt    *time.Time
	ReleasedByUID *int64
}

// MaxHoldReasonLength bounds a hold's reason (bytes).
const MaxHoldReasonLength = 2000

// HoldFilter selects holds to list, newest first.
type HoldFilter struct {
	// IncludeReleased lists released holds too (the history).
	IncludeReleased bool
	Tenant          string
	After           *Cursor
	Limit           int
}

// HoldStore keeps legal holds.
type HoldStore interface {
	// PlaceHold puts a hold on tenant unless one is active, which is
	// returned instead with created false.
	PlaceHold(ctx context.Context, tenant, reason string, uid *int64, now time.Time) (hold *Hold, created bool, err error)
	// ReleaseHold releases the tenant's active hold; derrors.ErrNotFound if none.
	ReleaseHold(ctx context.Context, tenant string, uid *int64, now time.Time) (*Hold, error)
	// ActiveHold returns the tenant's active hold; derrors.ErrNotFound if none.
	ActiveHold(ctx context.Context, tenant string) (*Hold, error)
	ListHolds(ctx context.Context, f HoldFilter) ([]*Hold, error)
}

// ErrOnHold means the tenant is under a legal hold: its data must stay.
var ErrOnHold = errors.New("tenant is on legal hold")

// OnHoldError refuses a deletion of a held tenant. It is both ErrOnHold and
// derrors.ErrConflict.
type OnHoldError struct{ Hold *Hold }

func (e *OnHoldError) Error() string {
	by := ""
	if e.Hold.HeldByUID != nil {
		by = fmt.Sprintf(" by uid %d", *e.Hold.HeldByUID)
	}
	return fmt.Sprintf("tenant %s is on legal hold since %s%s (%q): no deletion starts until the hold is released "+
		"(DELETE /api/v1/tenants/{tenant}/hold, lifecycled tenant release)", e.Hold.TenantID,
		e.Hold.HeldAt.UTC().Format(time.RFC3339), by, e.Hold.Reason)
}

// Is makes errors.Is match ErrOnHold and derrors.ErrConflict.
func (e *OnHoldError) Is(target error) bool {
	return target == ErrOnHold || target == derrors.ErrConflict
}
