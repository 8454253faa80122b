package deletion

import (
	"errors"
	"fmt"
	"strings"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
)

// TenantProblem is one invalid tenant id of a bulk request.
type TenantProblem struct {
	Index    int // in the request's list, from 0
	TenantID string
	Err      error
}

// InvalidTenantsError refuses a bulk request with invalid tenant ids, all
// of them listed; it is a derrors.ErrInvalid.
type InvalidTenantsError struct{ Problems []TenantProblem }

func (e *InvalidTenantsError) Error() string {
	parts := make([]string, 0, min(len(e.Problems), 5))
	for _, p := range e.Problems[:min(len(e.Problems), 5)] {
		parts = append(parts, fmt.Sprintf("tenant_ids[%d]: %s", p.Index, strings.TrimPrefix(p.Err.Error(), derrors.ErrInvalid.Error()+": ")))
	}
	more := ""
	if len(e.Problems) > 5 {
		more = fmt.Sprintf("; and %d more", len(e.Problems)-5)
	}
	what := fmt.Sprintf("%d of the tenant ids are invalid", len(e.Problems))
	if len(e.Problems) == 1 {
		what = "a tenant id is invalid"
	}
	return fmt.Sprintf("%s: %s, so none was queued: %s%s", derrors.ErrInvalid, what, strings.Join(parts, "; "), more)
}

// Is makes errors.Is match derrors.ErrInvalid.
func (e *InvalidTenantsError) Is(target error) bool { return target == derrors.ErrInvalid }

func asInvalid(err error, target **InvalidTenantsError) bool { return errors.As(err, target) }
