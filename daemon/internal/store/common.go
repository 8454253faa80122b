package store

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// newID returns a time-ordered UUIDv7, so that rows created together list in
// the order they arrived and index inserts stay at the right edge.
func newID() uuid.UUID {
	return uuid.Must(uuid.NewV7())
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func headersJSON(h []dlq.Header) string {
	if len(h) == 0 {
		return "[]"
	}
	b, err := json.Marshal(h)
	if err != nil {
		return "[]"
	}
	return string(b)
}

func collectTopicSummaries(each func(yield func(topic, status string, n int64, oldest *time.Time)) error) ([]dlq.TopicSummary, error) {
	var out []dlq.TopicSummary
	index := map[string]int{}
	err := each(func(topic, status string, n int64, oldest *time.Time) {
		i, ok := index[topic]
		if !ok {
			i = len(out)
			index[topic] = i
			counts := map[dlq.Status]int64{}
			for _, s := range dlq.Statuses {
				counts[s] = 0
			}
			out = append(out, dlq.TopicSummary{Topic: topic, Counts: counts})
		}
		out[i].Counts[dlq.Status(status)] += n
		if oldest != nil {
			t := oldest.UTC()
			out[i].OldestPendingAt = &t
		}
	})
	return out, err
}

func sortByCreation(msgs []dlq.Message) {
	sort.Slice(msgs, func(i, j int) bool {
		if !msgs[i].CreatedAt.Equal(msgs[j].CreatedAt) {
			return msgs[i].CreatedAt.Before(msgs[j].CreatedAt)
		}
		return msgs[i].ID.String() < msgs[j].ID.String()
	})
}

func ensureDir(file string) error {
	if file == ":memory:" {
		return nil
	}
	return os.MkdirAll(filepath.Dir(file), 0o750)
}

// deleterBreakdown is how a deleter's per-key counts are stored (one JSON
// column), next to initial_count and deleted_count.
type deleterBreakdown struct {
	Total   map[string]int64 `json:"total,omitempty"`
	Deleted map[string]int64 `json:"deleted,omitempty"`
}

// encodeDeleterDetail returns the breakdown and verification columns of a
// deleter's row; nil is NULL (nothing known).
func encodeDeleterDetail(st deletion.DeleterState) (breakdown, verification []byte, err error) {
	if st.TotalBreakdown != nil || st.DeletedBreakdown != nil {
		if breakdown, err = json.Marshal(deleterBreakdown{Total: st.TotalBreakdown, Deleted: st.DeletedBreakdown}); err != nil {
			return nil, nil, fmt.Errorf("encode breakdown of %s: %w", st.Name, err)
		}
	}
	if st.Verification != nil {
		if verification, err = json.Marshal(st.Verification); err != nil {
			return nil, nil, fmt.Errorf("encode verification of %s: %w", st.Name, err)
		}
	}
	return breakdown, verification, nil
}

// decodeDeleterDetail fills a deleter's breakdowns and verification from
// its columns.
func decodeDeleterDetail(d *deletion.DeleterState, breakdown, verification []byte) error {
	if len(breakdown) > 0 {
		var b deleterBreakdown
		if err := json.Unmarshal(breakdown, &b); err != nil {
			return fmt.Errorf("decode breakdown of %s: %w", d.Name, err)
		}
		d.TotalBreakdown, d.DeletedBreakdown = nonNilCounts(b.Total), nonNilCounts(b.Deleted)
	}
	if len(verification) > 0 {
		var v deletion.Verification
		if err := json.Unmarshal(verification, &v); err != nil {
			return fmt.Errorf("decode verification of %s: %w", d.Name, err)
		}
		v.Breakdown = nonNilCounts(v.Breakdown)
		d.Verification = &v
	}
	return nil
}

func nonNilCounts(m map[string]int64) map[string]int64 {
	if m == nil {
		return map[string]int64{}
	}
	return m
}

// nullText stores JSON as TEXT in SQLite, nil as NULL.
func nullText(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}
