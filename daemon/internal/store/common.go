package store

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/google/uuid"

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
