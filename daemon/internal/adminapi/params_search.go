package adminapi

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/enum"
)

// Query parsing for GET /api/v1/dlq/messages and GET /api/v1/dlq/groups.
// Everything is checked before the store is asked, and anything wrong,
// unknown parameters included (a misspelt filter must not silently match
// everything), is a 400 naming the parameter.

const (
	defaultSearchLimit = 50
	maxFilterLength    = 1024
)

var searchParams = map[string]bool{"topic": true, "status": true, "error": true, "group": true, "error_group": true, "key": true, "header": true,
	"q": true, "since": true, "until": true, "include_archived": true, "cursor": true, "limit": true, "order": true}

var groupParams = map[string]bool{"topic": true, "status": true, "sort": true, "by": true, "limit": true}

// query reads parameters of one request.
type query struct{ v url.Values }

func (q query) unknown(known map[string]bool) error {
	var names []string
	for k := range q.v {
		if !known[k] {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return nil
	}
	sort.Strings(names)
	var list []string
	for k := range known {
		list = append(list, k)
	}
	sort.Strings(list)
	return invalidField(names[0], "unknown parameter; the parameters are %s", strings.Join(list, ", "))
}

func (q query) one(name string) (string, bool, error) {
	v, ok := q.v[name]
	if !ok {
		return "", false, nil
	}
	if len(v) != 1 {
		return "", false, invalidField(name, "given %d times", len(v))
	}
	return v[0], true, nil
}

// text is a free-text filter: 1 to maxFilterLength bytes when given.
func (q query) text(name string) (string, error) {
	v, ok, err := q.one(name)
	if err != nil || !ok {
		return "", err
	}
	if v == "" || len(v) > maxFilterLength {
		return "", invalidField(name, "must be 1 to %d bytes; got %d", maxFilterLength, len(v))
	}
	return v, nil
}

// statuses reads status=, repeatable and comma-separated, case ignored.
func (q query) statuses() ([]dlq.Status, error) {
	var out []dlq.Status
	seen := map[dlq.Status]bool{}
	for _, v := range q.v["status"] {
		for _, s := range strings.Split(v, ",") {
			s = strings.TrimSpace(s)
			st, err := dlq.ParseStatus(strings.ToUpper(s))
			if err != nil {
				return nil, invalidField("status", "unknown status %q: must be %s", truncate(s), enum.Sentence(dlq.Statuses, "or"))
			}
			if !seen[st] {
				seen[st] = true
				out = append(out, st)
			}
		}
	}
	return out, nil
}

func (q query) limit() (int, error) {
	v, ok, err := q.one("limit")
	if err != nil || !ok {
		return defaultSearchLimit, err
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, invalidField("limit", "%q is not a number", truncate(v))
	}
	if n < 1 || n > maxPageSize {
		return 0, invalidField("limit", "must be between 1 and %d; got %d", maxPageSize, n)
	}
	return n, nil
}

func (q query) topic() (string, error) {
	v, ok, err := q.one("topic")
	if err != nil || !ok {
		return "", err
	}
	return parseTopic(v)
}

func (q query) time(name string) (*time.Time, error) {
	v, ok, err := q.one(name)
	if err != nil || !ok {
		return nil, err
	}
	t, err := parseRFC3339(v)
	if err != nil {
		return nil, invalidField(name, "%q is not an RFC 3339 time (like 2026-11-26T10:00:00Z)", truncate(v))
	}
	return &t, nil
}

// parseSearchQuery reads GET /api/v1/dlq/messages.
func parseSearchQuery(v url.Values) (dlq.SearchFilter, error) {
	q := query{v}
	var f dlq.SearchFilter
	var err error
	if err = q.unknown(searchParams); err != nil {
		return f, err
	}
	if f.Topic, err = q.topic(); err != nil {
		return f, err
	}
	if f.Statuses, err = q.statuses(); err != nil {
		return f, err
	}
	if f.Error, err = q.text("error"); err != nil {
		return f, err
	}
	if f.Text, err = q.text("q"); err != nil {
		return f, err
	}
	if g, ok, err := q.one("group"); err != nil {
		return f, err
	} else if ok {
		if !dlq.ValidGroupID(g) {
			return f, invalidField("group", "%q is not a group id (16 lower-case hex digits, as GET /api/v1/dlq/groups gives)", truncate(g))
		}
		f.Group = g
	}
	if g, ok, err := q.one("error_group"); err != nil {
		return f, err
	} else if ok {
		if !dlq.ValidGroupID(g) {
			return f, invalidField("error_group", "%q is not an error group id (16 lower-case hex digits, as GET /api/v1/dlq/groups?by=error gives)", truncate(g))
		}
		f.ErrorGroup = g
	}
	if k, ok, err := q.one("key"); err != nil {
		return f, err
	} else if ok {
		if k == "" || len(k) > maxFilterLength {
			return f, invalidField("key", "must not be empty nor longer than %d bytes", maxFilterLength)
		}
		f.Key = &k
	}
	for _, h := range v["header"] {
		name, value, hasValue := strings.Cut(h, "=")
		if name == "" || len(h) > maxFilterLength {
			return f, invalidField("header", "%q must be name or name=value, the name not empty, at most %d bytes", truncate(h), maxFilterLength)
		}
		hf := dlq.HeaderFilter{Name: name}
		if hasValue {
			hf.Value = &value
		}
		f.Headers = append(f.Headers, hf)
	}
	if f.Since, err = q.time("since"); err != nil {
		return f, err
	}
	if f.Until, err = q.time("until"); err != nil {
		return f, err
	}
	if f.Since != nil && f.Until != nil && !f.Since.Before(*f.Until) {
		return f, invalidField("until", "must be after since")
	}
	if b, ok, err := q.one("include_archived"); err != nil {
		return f, err
	} else if ok {
		if f.IncludeArchived, err = strconv.ParseBool(b); err != nil {
			return f, invalidField("include_archived", "%q is not true or false", truncate(b))
		}
	}
	if o, ok, err := q.one("order"); err != nil {
		return f, err
	} else if ok {
		switch o {
		case "newest":
		case "oldest":
			f.OldestFirst = true
		default:
			return f, invalidField("order", "%q: must be newest or oldest", truncate(o))
		}
	}
	if f.Limit, err = q.limit(); err != nil {
		return f, err
	}
	if c, ok, err := q.one("cursor"); err != nil {
		return f, err
	} else if ok && c != "" {
		if f.After, err = decodeCursor(c, filterDigest(v)); err != nil {
			return f, err
		}
	}
	return f, nil
}

// A cursor is opaque to clients: base64url of a version byte, eight bytes
// of the filter's digest (so that a cursor is refused with another
// filter, whose order it does not belong to), the created_at in
// microseconds and the id.
const cursorVersion = 1

// filterDigest identifies a search's filter and order: every parameter
// but cursor and limit, sorted.
func filterDigest(v url.Values) []byte {
	var keys []string
	for k := range v {
		if k != "cursor" && k != "limit" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		vals := append([]string(nil), v[k]...)
		sort.Strings(vals)
		for _, x := range vals {
			fmt.Fprintf(h, "%s=%s\x00", k, x)
		}
	}
	return h.Sum(nil)[:8]
}

func encodeCursor(c *dlq.SearchCursor, digest []byte) string {
	if c == nil {
		return ""
	}
	b := make([]byte, 0, 1+8+8+16)
	b = append(b, cursorVersion)
	b = append(b, digest...)
	b = binary.BigEndian.AppendUint64(b, uint64(c.CreatedAt.UnixMicro()))
	b = append(b, c.ID[:]...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string, digest []byte) (*dlq.SearchCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 33 || b[0] != cursorVersion {
		return nil, invalidField("cursor", "not a cursor this daemon gave (pass next_cursor unchanged)")
	}
	if string(b[1:9]) != string(digest) {
		return nil, invalidField("cursor", "the cursor belongs to a search with other filters or another order")
	}
	id, _ := uuid.FromBytes(b[17:])
	return &dlq.SearchCursor{CreatedAt: time.UnixMicro(int64(binary.BigEndian.Uint64(b[9:17]))).UTC(), ID: id}, nil
}

// parseGroupsQuery reads GET /api/v1/dlq/groups.
func parseGroupsQuery(v url.Values) (dlq.GroupFilter, error) {
	q := query{v}
	f := dlq.GroupFilter{Sort: dlq.GroupsByCount}
	var err error
	if err = q.unknown(groupParams); err != nil {
		return f, err
	}
	if f.Topic, err = q.topic(); err != nil {
		return f, err
	}
	if f.Statuses, err = q.statuses(); err != nil {
		return f, err
	}
	if s, ok, err := q.one("sort"); err != nil {
		return f, err
	} else if ok {
		switch dlq.GroupSort(s) {
		case dlq.GroupsByCount, dlq.GroupsByRecent:
			f.Sort = dlq.GroupSort(s)
		default:
			return f, invalidField("sort", "%q: must be count or recent", truncate(s))
		}
	}
	if s, ok, err := q.one("by"); err != nil {
		return f, err
	} else if ok {
		switch dlq.GroupBy(s) {
		case dlq.GroupByFailure, dlq.GroupByError:
			f.By = dlq.GroupBy(s)
		default:
			return f, invalidField("by", "%q: must be failure or error", truncate(s))
		}
	}
	if f.Limit, err = q.limit(); err != nil {
		return f, err
	}
	return f, nil
}
