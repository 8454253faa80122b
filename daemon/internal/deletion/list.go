package deletion

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
)

// Lists are paged by keyset: newest first by a time and then the id, and a
// page ends with a cursor naming its last row, so that rows added while a
// client pages never shift the pages it has not read yet.

// Page sizes of the lists.
const (
	DefaultPageSize = 50
	MaxPageSize     = 1000
)

// JobFilter selects jobs to list. Zero values select everything.
type JobFilter struct {
	Tenant   string // canonical
	Statuses []JobStatus
	// CreatedAfter and CreatedBefore bound created_at (inclusive, exclusive).
	CreatedAfter, CreatedBefore *time.Time
	After                       *Cursor
	Limit                       int
}

// Cursor is the position after which a page starts: the sort time and id
// of the last row of the page before.
type Cursor struct {
	At time.Time
	ID uuid.UUID
}

// String encodes the cursor for a next_cursor field.
func (c Cursor) String() string {
	raw := strconv.FormatInt(c.At.UnixMicro(), 10) + "." + c.ID.String()
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// ParseCursor decodes a cursor that String made; errors wrap derrors.ErrInvalid.
func ParseCursor(s string) (*Cursor, error) {
	bad := fmt.Errorf("%w: cursor %q is not one a list answered (pass next_cursor as it came)", derrors.ErrInvalid, truncateForError(s))
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, bad
	}
	at, id, ok := strings.Cut(string(raw), ".")
	if !ok {
		return nil, bad
	}
	micros, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return nil, bad
	}
	u, err := uuid.Parse(id)
	if err != nil || len(id) != 36 {
		return nil, bad
	}
	return &Cursor{At: time.UnixMicro(micros).UTC(), ID: u}, nil
}

func truncateForError(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

// JobPage is one page of a job list; Next is nil on the last page.
type JobPage struct {
	Jobs []*Job
	Next *Cursor
}

// HoldPage is one page of a hold list; Next is nil on the last page.
type HoldPage struct {
	Holds []*Hold
	Next  *Cursor
}

// listPage reads one page with list, after setting the filter's tenant
// (when given) to its canonical spelling and its limit to one more than
// the page's, to know whether there is a next page; list reads the filter
// these point into.
func listPage[T any](s *Service, tenant *string, limit *int, list func() ([]T, error), key func(T) Cursor) ([]T, *Cursor, error) {
	if *tenant != "" {
		t, err := s.canonical(*tenant)
		if err != nil {
			return nil, nil, err
		}
		*tenant = t
	}
	n := pageLimit(*limit)
	*limit = n + 1
	rows, err := list()
	if err != nil {
		return nil, nil, err
	}
	rows, next := pageOf(rows, n, key)
	return rows, next, nil
}

// pageOf trims rows read with limit+1 to limit and returns the cursor of
// the last row kept when there were more.
func pageOf[T any](rows []T, limit int, key func(T) Cursor) ([]T, *Cursor) {
	if len(rows) <= limit {
		return rows, nil
	}
	rows = rows[:limit]
	c := key(rows[len(rows)-1])
	return rows, &c
}
