package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"
)

// sqliteSeeGroup records a group seen at ?5 (upsert: the first and
// last sightings widen): (id, pattern, exception class, sample error, at,
// error group).
const sqliteSeeGroup = `
		INSERT INTO dlq_failure_groups (id, pattern, exception_class, sample_error, first_seen, last_seen, error_group)
		VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6)
		ON CONFLICT (id) DO UPDATE SET first_seen = min(first_seen, excluded.first_seen),
			last_seen = max(last_seen, excluded.last_seen)`

var sqliteGroups = sqlstore.GroupsSQL{See: sqliteSeeGroup,
	Regroup:       `UPDATE dlq_messages SET failure_group = ?2 WHERE id = ?1 AND failure_group = ''`,
	SetErrorGroup: `UPDATE dlq_failure_groups SET error_group = ?2 WHERE id = ?1`,
	// Times are microseconds since the epoch.
	HourBucket: `(%[1]s - %[2]s) / 3600000000`}

// batchGroups collects what a SQLite intake batch adds to the failure
// groups, written once per batch: a statement per message and group cost
// a third of the embedded store's intake.
type batchGroups struct {
	seen   map[string]bool
	order  []dlq.Group
	sample map[string]string
	counts map[[4]string]int64 // group, DLQ topic, original topic, status
	// arrivals: DLQ topic, group
	arrivals map[[2]string]int64
}

func newBatchGroups() *batchGroups {
	return &batchGroups{seen: map[string]bool{}, sample: map[string]string{}, counts: map[[4]string]int64{},
		arrivals: map[[2]string]int64{}}
}

func (b *batchGroups) add(g dlq.Group, in dlq.Incoming, status string) {
	if !b.seen[g.ID] {
		b.seen[g.ID] = true
		b.order = append(b.order, g)
		b.sample[g.ID] = in.ErrorMessage
	}
	b.counts[[4]string{g.ID, in.Position.Topic, in.OriginalTopic, status}]++
	b.arrivals[[2]string{in.Position.Topic, g.ID}]++
}

func (b *batchGroups) flush(ctx context.Context, q sqlstore.Querier, now time.Time) error {
	for _, g := range b.order {
		if err := sqlstore.SeeGroup(ctx, q, sqliteSeeGroup, g, b.sample[g.ID], now); err != nil {
			return err
		}
	}
	for k, n := range b.counts {
		if _, err := q.Exec(ctx, `INSERT INTO dlq_group_counts (group_id, dlq_topic, original_topic, status, n)
			VALUES (?1, ?2, ?3, ?4, ?5)
			ON CONFLICT (group_id, dlq_topic, original_topic, status) DO UPDATE SET n = n + excluded.n`,
			k[0], k[1], k[2], k[3], n); err != nil {
			return fmt.Errorf("count failure group %s: %w", k[0], err)
		}
	}
	// Every message of the batch is created at now: one hour.
	hour := now.UTC().Truncate(time.Hour)
	for k, n := range b.arrivals {
		if _, err := q.Exec(ctx, `INSERT INTO dlq_arrivals (hour, dlq_topic, failure_group, n) VALUES (?1, ?2, ?3, ?4)
			ON CONFLICT (hour, dlq_topic, failure_group) DO UPDATE SET n = n + excluded.n`, hour, k[0], k[1], n); err != nil {
			return fmt.Errorf("count arrivals of %s: %w", k[0], err)
		}
	}
	return nil
}
