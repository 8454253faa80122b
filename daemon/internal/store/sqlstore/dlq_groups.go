package sqlstore

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// Failure groups (GET /api/v1/dlq/groups): dlq_failure_groups says what a
// group looks like and when it was seen, dlq_group_counts how many live
// messages it has per topic and status (kept by intake and by triggers), so
// that listing groups never reads the messages.

// maxSampleError bounds the sample kept per group: the head of a stack
// trace says what it is.
const maxSampleError = 4096

func SeeGroup(ctx context.Context, q Querier, stmt string, g dlq.Group, sample string, at time.Time) error {
	if len(sample) > maxSampleError {
		sample = strings.ToValidUTF8(sample[:maxSampleError], "")
	}
	if _, err := q.Exec(ctx, stmt, g.ID, g.Pattern, g.ExceptionClass, sample, at, g.ErrorGroup); err != nil {
		return fmt.Errorf("record failure group %s: %w", g.ID, err)
	}
	return nil
}

// GroupsSQL is what differs between the dialects' group statements.
type GroupsSQL struct {
	// See records a group seen at a time (upsert: its first and last
	// sightings widen): (id, pattern, exception class, sample error, at).
	See string
	// Regroup sets an ungrouped message's group, leaving updated_at as it
	// is (retention goes by it): (id, group).
	Regroup string
	// SetErrorGroup sets a failure group's error group: (id, error group).
	SetErrorGroup string
	// HourBucket is the expression of the hour a created_at (%[1]s) falls
	// in, counted from the start of the window (the placeholder %[2]s).
	HourBucket string
}

// groups lists failure groups: the top ones by the filter's sort from the
// counters, then their counts by topic and status.
func (s *Store) groups(ctx context.Context, gs GroupsSQL, f dlq.GroupFilter) ([]dlq.GroupSummary, error) {
	d := s.sql.Search
	var out []dlq.GroupSummary
	err := s.conn.Snapshot(ctx, func(qr Querier) error {
		// The conditions of the filter, built once per statement.
		condsFor := func(q *SearchQuery) []string {
			conds := []string{"c.n > 0"}
			if f.Topic != "" {
				t := q.Arg(f.Topic)
				conds = append(conds, "(c.dlq_topic = "+t+" OR c.original_topic = "+t+")")
			}
			if len(f.Statuses) > 0 {
				var in []string
				for _, st := range f.Statuses {
					in = append(in, q.Arg(string(st)))
				}
				conds = append(conds, "c.status IN ("+strings.Join(in, ", ")+")")
			}
			return conds
		}
		// By error, the rows are error groups: each gathers the failure
		// groups of one pattern, its sample the first seen's.
		columns := "g.id, g.pattern, g.exception_class, g.sample_error, g.first_seen, g.last_seen, g.error_group"
		key, groupBy := "g.id", columns
		if f.By == dlq.GroupByError {
			key, groupBy = "g.error_group", "g.error_group"
			columns = `g.error_group, min(g.pattern), '', (SELECT f.sample_error FROM ` + d.Groups + ` f
				WHERE f.error_group = g.error_group ORDER BY f.first_seen, f.id LIMIT 1), min(g.first_seen), max(g.last_seen),
				g.error_group`
		}
		q := &SearchQuery{d: d}
		conds := condsFor(q)
		if f.By == dlq.GroupByError {
			conds = append(conds, "g.error_group <> ''") // not backfilled yet (migration 025)
		}
		where := strings.Join(conds, " AND ")
		order := "sum(c.n) DESC, max(g.last_seen) DESC, " + key
		if f.Sort == dlq.GroupsByRecent {
			order = "max(g.last_seen) DESC, sum(c.n) DESC, " + key
		}
		top := fmt.Sprintf(`SELECT %s FROM %s c JOIN %s g ON g.id = c.group_id WHERE %s
			GROUP BY %s ORDER BY %s LIMIT %s`, columns, d.GroupCounts, d.Groups, where, groupBy, order, q.Arg(f.Limit))
		var err error
		out, err = QueryAll(ctx, qr, func(sc Scanner) (g dlq.GroupSummary, err error) {
			err = sc.Scan(&g.ID, &g.Pattern, &g.ExceptionClass, &g.SampleError, &g.FirstSeen, &g.LastSeen, &g.ErrorGroup)
			return g, err
		}, top, q.args...)
		if err != nil {
			return fmt.Errorf("list failure groups: %w", err)
		}
		if len(out) == 0 {
			return nil
		}
		index := map[string]int{}
		var ids []string
		for i := range out {
			index[out[i].ID] = i
			ids = append(ids, out[i].ID)
			out[i].Counts = map[dlq.Status]int64{}
			for _, st := range dlq.Statuses {
				out[i].Counts[st] = 0
			}
		}
		q2 := &SearchQuery{d: d}
		var in []string
		for _, id := range ids {
			in = append(in, q2.Arg(id))
		}
		detail := strings.Join(append([]string{key + " IN (" + strings.Join(in, ", ") + ")"}, condsFor(q2)...), " AND ")
		type row struct {
			key, group, class, dlqTopic, origTopic, status string
			n                                              int64
		}
		rows, err := QueryAll(ctx, qr, func(sc Scanner) (r row, err error) {
			return r, sc.Scan(&r.key, &r.group, &r.class, &r.dlqTopic, &r.origTopic, &r.status, &r.n)
		}, `SELECT `+key+`, c.group_id, g.exception_class, c.dlq_topic, c.original_topic, c.status, c.n
			FROM `+d.GroupCounts+` c JOIN `+d.Groups+` g ON g.id = c.group_id WHERE `+detail, q2.args...)
		if err != nil {
			return fmt.Errorf("count failure groups: %w", err)
		}
		for _, r := range rows {
			g := &out[index[r.key]]
			g.Counts[dlq.Status(r.status)] += r.n
			if r.origTopic != "" && !contains(g.OriginalTopics, r.origTopic) {
				g.OriginalTopics = append(g.OriginalTopics, r.origTopic)
			}
			if !contains(g.DLQTopics, r.dlqTopic) {
				g.DLQTopics = append(g.DLQTopics, r.dlqTopic)
			}
			if !contains(g.Members, r.group) {
				g.Members = append(g.Members, r.group)
			}
			if r.class != "" && !contains(g.ExceptionClasses, r.class) {
				g.ExceptionClasses = append(g.ExceptionClasses, r.class)
			}
		}
		if !f.Now.IsZero() {
			if err := s.arrivals(ctx, qr, gs, f, out); err != nil {
				return err
			}
		}
		for i := range out {
			sort.Strings(out[i].OriginalTopics)
			sort.Strings(out[i].DLQTopics)
			sort.Strings(out[i].Members)
			sort.Strings(out[i].ExceptionClasses)
			out[i].FirstSeen, out[i].LastSeen = out[i].FirstSeen.UTC(), out[i].LastSeen.UTC()
		}
		return nil
	})
	return out, err
}

// arrivals reads the live messages of each summary's failure groups taken
// in per hour of the window from the arrivals counters (see topicArrivals).
func (s *Store) arrivals(ctx context.Context, qr Querier, gs GroupsSQL, f dlq.GroupFilter, out []dlq.GroupSummary) error {
	since := dlq.ArrivalsSince(f.Now)
	owner := map[string][]int{}
	q := &SearchQuery{d: s.sql.Search}
	var groups []string
	for i := range out {
		out[i].Arrivals, out[i].ArrivalsFrom = make([]int64, dlq.ArrivalHours), since
		for _, g := range out[i].Members {
			if _, ok := owner[g]; !ok {
				groups = append(groups, q.Arg(g))
			}
			owner[g] = append(owner[g], i)
		}
	}
	if len(groups) == 0 {
		return nil
	}
	from := q.Arg(since)
	bucket := fmt.Sprintf(gs.HourBucket, "hour", from)
	type row struct {
		group string
		hour  int
		n     int64
	}
	rows, err := QueryAll(ctx, qr, func(sc Scanner) (r row, err error) {
		return r, sc.Scan(&r.group, &r.hour, &r.n)
	}, `SELECT failure_group, `+bucket+`, CAST(sum(n) AS BIGINT) FROM `+s.sql.Search.Arrivals+` WHERE failure_group IN (`+strings.Join(groups, ", ")+
		`) AND hour >= `+from+` GROUP BY 1, 2`, q.args...)
	if err != nil {
		return fmt.Errorf("count failure groups' arrivals: %w", err)
	}
	for _, r := range rows {
		if r.hour < 0 || r.hour >= dlq.ArrivalHours {
			continue // taken in after now (another daemon's clock)
		}
		for _, i := range owner[r.group] {
			out[i].Arrivals[r.hour] += r.n
		}
	}
	return nil
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// backfillGroups gives up to limit messages stored before failure groups
// existed their group, and then failure groups recorded before error
// groups existed their error group, in one transaction.
func (s *Store) backfillGroups(ctx context.Context, gs GroupsSQL, limit int) (int, error) {
	type old struct {
		id                 uuid.UUID
		origTopic, errText string
		headers            []byte
		createdAt          time.Time
	}
	done := 0
	err := s.conn.Tx(ctx, func(q Querier) error {
		done = 0
		rows, err := QueryAll(ctx, q, func(sc Scanner) (o old, err error) {
			return o, sc.Scan(&o.id, &o.origTopic, &o.errText, &o.headers, &o.createdAt)
		}, `SELECT id, original_topic, error_message, headers, created_at FROM `+s.sql.Search.Live+
			` WHERE failure_group = '' LIMIT `+s.sql.Search.Placeholder(1), limit)
		if err != nil {
			return fmt.Errorf("read ungrouped dead letters: %w", err)
		}
		for _, o := range rows {
			hs, err := decodeHeaders(o.headers)
			if err != nil {
				hs = nil // unreadable headers: grouped by text and topic alone
			}
			g := dlq.FailureGroup(o.origTopic, dlq.LegacyExceptionClass(hs), o.errText)
			n, err := q.Exec(ctx, gs.Regroup, o.id, g.ID)
			if err != nil {
				return fmt.Errorf("group dead letter %s: %w", o.id, err)
			}
			if n == 0 {
				continue
			}
			if err := SeeGroup(ctx, q, gs.See, g, o.errText, o.createdAt); err != nil {
				return err
			}
			done++
		}
		return s.backfillErrorGroups(ctx, q, gs, limit-done, &done)
	})
	return done, err
}

// backfillErrorGroups gives up to limit failure groups recorded before
// error groups existed (migration 025) their error group.
func (s *Store) backfillErrorGroups(ctx context.Context, q Querier, gs GroupsSQL, limit int, done *int) error {
	if limit <= 0 {
		return nil
	}
	type old struct{ id, pattern string }
	rows, err := QueryAll(ctx, q, func(sc Scanner) (o old, err error) {
		return o, sc.Scan(&o.id, &o.pattern)
	}, `SELECT id, pattern FROM `+s.sql.Search.Groups+` WHERE error_group = '' LIMIT `+s.sql.Search.Placeholder(1), limit)
	if err != nil {
		return fmt.Errorf("read failure groups without an error group: %w", err)
	}
	for _, o := range rows {
		if _, err := q.Exec(ctx, gs.SetErrorGroup, o.id, dlq.ErrorGroupID(o.pattern)); err != nil {
			return fmt.Errorf("give failure group %s its error group: %w", o.id, err)
		}
		*done++
	}
	return nil
}

// DLQGroups implements dlq.SearchStore.
func (s *Store) DLQGroups(ctx context.Context, f dlq.GroupFilter) ([]dlq.GroupSummary, error) {
	return s.groups(ctx, s.sql.Groups, f)
}

// BackfillDLQGroups implements dlq.SearchStore.
func (s *Store) BackfillDLQGroups(ctx context.Context, limit int) (int, error) {
	return s.backfillGroups(ctx, s.sql.Groups, limit)
}
