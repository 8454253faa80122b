package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// DLQTopicActivity implements dlq.SearchStore. Every query walks the
// (dlq_topic, status, created_at, id) index one topic and status at a
// time: the first and last sightings are an index probe each, the
// arrivals the window's part of it. The topics are those of the live
// counters, so a topic whose messages all left has none.
func (s *Store) DLQTopicActivity(ctx context.Context, now time.Time) (map[string]dlq.TopicActivity, error) {
	d := s.sql.Search
	out := map[string]dlq.TopicActivity{}
	err := s.conn.Snapshot(ctx, func(qr Querier) error {
		clear(out)
		type seen struct {
			topic       string
			first, last *time.Time
		}
		rows, err := QueryAll(ctx, qr, func(sc Scanner) (r seen, err error) {
			return r, sc.Scan(&r.topic, &r.first, &r.last)
		}, `SELECT c.dlq_topic,
				(SELECT min(m.created_at) FROM `+d.Live+` m WHERE m.dlq_topic = c.dlq_topic AND m.status = c.status),
				(SELECT max(m.created_at) FROM `+d.Live+` m WHERE m.dlq_topic = c.dlq_topic AND m.status = c.status)
			FROM (SELECT dlq_topic, status FROM `+d.TopicCounts+` GROUP BY 1, 2 HAVING sum(n) > 0) c`)
		if err != nil {
			return fmt.Errorf("read topics' first and last dead letters: %w", err)
		}
		since := dlq.ArrivalsSince(now)
		for _, r := range rows {
			a, ok := out[r.topic]
			if !ok {
				a = dlq.TopicActivity{Arrivals: make([]int64, dlq.ArrivalHours), ArrivalsFrom: since}
			}
			if r.first != nil && (a.FirstSeen.IsZero() || r.first.Before(a.FirstSeen)) {
				a.FirstSeen = r.first.UTC()
			}
			if r.last != nil && r.last.After(a.LastSeen) {
				a.LastSeen = r.last.UTC()
			}
			out[r.topic] = a
		}
		if len(out) == 0 {
			return nil
		}
		return s.topicArrivals(ctx, qr, since, out)
	})
	return out, err
}

// topicArrivals reads each topic's live messages taken in per hour since
// since from the arrivals counters: 24 rows a topic and group at most,
// however many messages came (counting the messages themselves cost 342 ms
// at 1M stored with 120k of them recent).
func (s *Store) topicArrivals(ctx context.Context, qr Querier, since time.Time, out map[string]dlq.TopicActivity) error {
	q := &SearchQuery{d: s.sql.Search}
	from := q.Arg(since)
	bucket := fmt.Sprintf(s.sql.Groups.HourBucket, "hour", from)
	type row struct {
		topic string
		hour  int
		n     int64
	}
	rows, err := QueryAll(ctx, qr, func(sc Scanner) (r row, err error) {
		return r, sc.Scan(&r.topic, &r.hour, &r.n)
	}, `SELECT dlq_topic, `+bucket+`, CAST(sum(n) AS BIGINT) FROM `+s.sql.Search.Arrivals+` WHERE hour >= `+from+` GROUP BY 1, 2`, q.args...)
	if err != nil {
		return fmt.Errorf("count topics' arrivals: %w", err)
	}
	for _, r := range rows {
		a, ok := out[r.topic]
		if !ok || r.hour < 0 || r.hour >= dlq.ArrivalHours {
			continue // taken in after now (another daemon's clock), or counted after the topics were read
		}
		a.Arrivals[r.hour] += r.n
	}
	return nil
}
