package adminapi

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/enum"
)

// Route and query parsing for the DLQ routes. Everything that comes from
// the URL is checked here, before any store or plugin is called, and bad
// input is a 400 with the field that was wrong.

const (
	defaultPageSize = 20
	maxPageSize     = 1000
	maxPage         = 1_000_000
)

// parseID accepts only the canonical 36-character UUID form.
func parseID(s string) (uuid.UUID, error) {
	if len(s) != 36 {
		return uuid.Nil, invalidField("id", "invalid message id: %s (want a UUID)", truncate(s))
	}
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, invalidField("id", "invalid message id: %s (want a UUID)", truncate(s))
	}
	return id, nil
}

func parseTopic(s string) (string, error) {
	if err := dlq.ValidTopic(s); err != nil {
		return "", invalidField("topic", "%s", strings.TrimPrefix(err.Error(), "invalid input: "))
	}
	return s, nil
}

// listQuery is the parsed query of GET /api/v1/dlq/{topic}.
type listQuery struct {
	Page, PageSize int
	Status         dlq.Status
}

func parseListQuery(q url.Values) (listQuery, error) {
	out := listQuery{Page: 1, PageSize: defaultPageSize}
	one := func(name string) (string, bool, error) {
		v, ok := q[name]
		if !ok {
			return "", false, nil
		}
		if len(v) != 1 {
			return "", false, invalidField(name, "given %d times", len(v))
		}
		return v[0], true, nil
	}
	num := func(name string, min, max int) (int, bool, error) {
		v, ok, err := one(name)
		if err != nil || !ok {
			return 0, ok, err
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, false, invalidField(name, "%q is not a number", truncate(v))
		}
		if n < min || n > max {
			return 0, false, invalidField(name, "must be between %d and %d; got %d", min, max, n)
		}
		return n, true, nil
	}
	if n, ok, err := num("page", 1, maxPage); err != nil {
		return out, err
	} else if ok {
		out.Page = n
	}
	if n, ok, err := num("page_size", 1, maxPageSize); err != nil {
		return out, err
	} else if ok {
		out.PageSize = n
	}
	if v, ok, err := one("status"); err != nil {
		return out, err
	} else if ok && v != "" {
		st, err := dlq.ParseStatus(strings.ToUpper(v))
		if err != nil {
			return out, invalidField("status", "unknown status %q: must be %s", truncate(v), enum.Sentence(dlq.Statuses, "or"))
		}
		out.Status = st
	}
	return out, nil
}

// parseDryRun reads ?dry_run= of a destructive POST: absent means false.
func parseDryRun(q url.Values) (bool, error) {
	v, ok := q["dry_run"]
	if !ok {
		return false, nil
	}
	if len(v) != 1 {
		return false, invalidField("dry_run", "given %d times", len(v))
	}
	// true or false only: strconv.ParseBool also takes 0, f, F and
	// FALSE, and `?dry_run=F` on a destructive route does the real thing.
	switch v[0] {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, invalidField("dry_run", "%q is not true or false", truncate(v[0]))
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

// parseRFC3339 is time.Parse with time.RFC3339Nano without two readings
// of Go's parser that a person would not expect: a comma before the
// fraction (an ISO 8601 form RFC 3339 does not have), and digits past
// nanoseconds, which it drops without a word.
func parseRFC3339(v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, err
	}
	if i := strings.IndexAny(v, ".,"); i >= 0 {
		if v[i] == ',' {
			return time.Time{}, errors.New("a comma before the fraction")
		}
		digits := 0
		for _, c := range v[i+1:] {
			if c < '0' || c > '9' {
				break
			}
			digits++
		}
		if digits > 9 {
			return time.Time{}, errors.New("more than nine digits of fraction")
		}
	}
	return t, nil
}
