package adminapi

import (
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/enum"
)

// Query and body parsing for the erasure routes (jobs, holds, receipts):
// everything from the request is checked here, before any store is called.

// decodeBody reads a JSON object body into out, strictly (strictJSON,
// with nested as there). An empty body leaves out as it is and returns
// false. shape describes the expected body for the error.
func decodeBody(r *http.Request, out any, shape string, nested ...nestedObject) (bool, error) {
	data, err := readBody(r)
	if err != nil || data == nil {
		return false, err
	}
	return true, strictJSON(data, out, shape, nested...)
}

// decodeRequired reads the body of a route that needs one, with field set
// (present says whether it is): a request that gives none, or not that
// field, is refused with the shape it must have.
func decodeRequired(r *http.Request, out any, shape, field string, present func() bool) error {
	if err := strictRequest(r, bodyAllowed); err != nil {
		return err
	}
	given, err := decodeBody(r, out, shape)
	if err == nil && (!given || !present()) {
		err = invalidField(field, "the body must be %s", shape)
	}
	return err
}

// callerUID is the caller's uid from the socket's peer credentials; nil
// when unknown.
func callerUID(r *http.Request) *int64 {
	p := Peer(r.Context())
	if !p.Known {
		return nil
	}
	uid := int64(p.UID)
	return &uid
}

// onlyParams refuses query parameters a route does not take, so that a
// misspelt filter is a 400 rather than a list of everything.
func onlyParams(q url.Values, allowed ...string) error {
	var unknown []string
	for k := range q {
		ok := false
		for _, a := range allowed {
			ok = ok || k == a
		}
		if !ok {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	if len(allowed) == 0 {
		return invalidField(unknown[0], "unknown query parameter; this route takes none")
	}
	return invalidField(unknown[0], "unknown query parameter; this route takes %s", strings.Join(allowed, ", "))
}

// single returns the one value of a query parameter.
func single(q url.Values, name string) (string, bool, error) {
	v, ok := q[name]
	if !ok {
		return "", false, nil
	}
	if len(v) != 1 {
		return "", false, invalidField(name, "given %d times", len(v))
	}
	return v[0], true, nil
}

func parseTimeField(field, v string) (time.Time, error) {
	t, err := parseRFC3339(v)
	if err != nil {
		return time.Time{}, invalidField(field, "%q is not an RFC 3339 time such as 2026-11-01T12:00:00Z", truncate(v))
	}
	return t, nil
}

// parsePage reads limit and cursor.
func parsePage(q url.Values) (limit int, cursor *deletion.Cursor, err error) {
	if v, ok, err := single(q, "limit"); err != nil {
		return 0, nil, err
	} else if ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > deletion.MaxPageSize {
			return 0, nil, invalidField("limit", "must be a number between 1 and %d; got %q", deletion.MaxPageSize, truncate(v))
		}
		limit = n
	}
	if v, ok, err := single(q, "cursor"); err != nil {
		return 0, nil, err
	} else if ok && v != "" {
		c, err := deletion.ParseCursor(v)
		if err != nil {
			return 0, nil, invalidField("cursor", "not a cursor a list answered: pass next_cursor as it came")
		}
		cursor = c
	}
	return limit, cursor, nil
}

// parseJobQuery reads the filters of GET /api/v1/deletions (withTenant)
// and of GET /api/v1/tenants/{tenant}/deletions.
func parseJobQuery(q url.Values, withTenant bool) (deletion.JobFilter, error) {
	allowed := []string{"status", "created_after", "created_before", "limit", "cursor"}
	if withTenant {
		allowed = append(allowed, "tenant")
	}
	var f deletion.JobFilter
	if err := onlyParams(q, allowed...); err != nil {
		return f, err
	}
	var err error
	if f.Limit, f.After, err = parsePage(q); err != nil {
		return f, err
	}
	for _, v := range q["status"] {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}
			st, ok := deletion.ParseJobStatus(s)
			if !ok {
				return f, invalidField("status", "unknown status %q: must be one or more of %s", truncate(s), strings.Join(enum.Strings(deletion.JobStatuses), ", "))
			}
			f.Statuses = append(f.Statuses, st)
		}
	}
	for _, b := range []struct {
		name string
		dst  **time.Time
	}{{"created_after", &f.CreatedAfter}, {"created_before", &f.CreatedBefore}} {
		v, ok, err := single(q, b.name)
		if err != nil {
			return f, err
		}
		if ok {
			t, err := parseTimeField(b.name, v)
			if err != nil {
				return f, err
			}
			*b.dst = &t
		}
	}
	if withTenant {
		if v, ok, err := single(q, "tenant"); err != nil {
			return f, err
		} else if ok {
			f.Tenant = v
			if v == "" {
				return f, invalidField("tenant", "must not be empty when given")
			}
		}
	}
	return f, nil
}

// parsePlanHash reads an optional plan_hash. Given empty, it is refused,
// not taken for "no check": a script that sent "" meant a check.
func parsePlanHash(v *string) (string, error) {
	if v == nil {
		return "", nil
	}
	if *v == "" {
		return "", invalidField("plan_hash", "empty: give the plan hash read (GET .../plan), or leave plan_hash out")
	}
	return *v, nil
}

// parseNotBefore reads an optional not_before. Given empty, it is
// refused, not taken for "now".
func parseNotBefore(v *string) (*time.Time, error) {
	if v == nil {
		return nil, nil
	}
	if *v == "" {
		return nil, invalidField("not_before", "empty: give an RFC 3339 time, or leave not_before out to start now")
	}
	t, err := parseTimeField("not_before", *v)
	if err != nil {
		return nil, err
	}
	return &t, nil
}
