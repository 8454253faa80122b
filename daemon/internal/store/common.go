package store

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"
	"unicode/utf8"

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

// storedHeader is how a header is kept in the headers column (a JSON array):
// the key as text when it is UTF-8 ("key"), else as base64 ("key_b64"); the
// value always as base64. Rows written before header keys were bytes hold
// only "key", so both forms are read.
type storedHeader struct {
	Key    *string `json:"key,omitempty"`
	KeyB64 []byte  `json:"key_b64,omitempty"`
	Value  []byte  `json:"value"`
}

func headersJSON(hs []dlq.Header) string {
	if len(hs) == 0 {
		return "[]"
	}
	out := make([]storedHeader, len(hs))
	for i, h := range hs {
		out[i].Value = h.Value
		if utf8.Valid(h.Key) {
			k := string(h.Key)
			out[i].Key = &k
		} else {
			out[i].KeyB64 = h.Key
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		// []byte and valid UTF-8 strings always encode; this cannot happen.
		panic(fmt.Sprintf("encode headers: %v", err))
	}
	return string(b)
}

func decodeHeaders(b []byte) ([]dlq.Header, error) {
	if len(b) == 0 || string(b) == "[]" {
		return nil, nil
	}
	var in []storedHeader
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, err
	}
	out := make([]dlq.Header, len(in))
	for i, h := range in {
		out[i].Value = h.Value
		switch {
		case h.KeyB64 != nil:
			out[i].Key = h.KeyB64
		case h.Key != nil:
			out[i].Key = []byte(*h.Key)
		default:
			out[i].Key = []byte{}
		}
	}
	return out, nil
}

// attemptJSON encodes one history entry for the attempt_log column.
func attemptJSON(a *dlq.Attempt) *string {
	if a == nil {
		return nil
	}
	b, err := json.Marshal(a)
	if err != nil {
		panic(fmt.Sprintf("encode attempt: %v", err))
	}
	s := string(b)
	return &s
}

func attemptLog(a *dlq.Attempt) string {
	if a == nil {
		return "[]"
	}
	return "[" + *attemptJSON(a) + "]"
}

func decodeAttempts(b []byte) ([]dlq.Attempt, error) {
	if len(b) == 0 || string(b) == "[]" {
		return nil, nil
	}
	var out []dlq.Attempt
	err := json.Unmarshal(b, &out)
	return out, err
}

// statusOf is the status a new message is stored with.
func statusOf(in dlq.Incoming) string {
	if in.Dead {
		return string(dlq.StatusDead)
	}
	return string(dlq.StatusPending)
}

// firstRetry is a new message's first automatic retry: none when it is
// stored DEAD or automatic retries are off.
func firstRetry(in dlq.Incoming, opts dlq.IngestOptions) *time.Time {
	if in.Dead || opts.FirstRetryAt == nil {
		return nil
	}
	return opts.FirstRetryAt()
}

// isOurReplay is the rule for x-dlq-id: the record exists (the caller found
// it), the broker acknowledged a republish of it, and the message came back
// on the source and DLQ topic the record was read from. A header copied onto
// another dead letter (Kafka Streams and many frameworks propagate headers)
// fails it, and the message is stored as a new record.
func isOurReplay(in dlq.Incoming, source, dlqTopic string, republishedAt *time.Time) bool {
	return republishedAt != nil && in.Position.Source == source && in.Position.Topic == dlqTopic
}

// returnAttempt is the history entry of a replay that came back.
func returnAttempt(in dlq.Incoming, now time.Time) (*dlq.Attempt, string) {
	reason := fmt.Sprintf("the replay failed again and came back to %s (partition %d, offset %d): %s",
		in.Position.Topic, in.Position.Partition, in.Position.Offset, in.ErrorMessage)
	return &dlq.Attempt{At: now, Outcome: dlq.OutcomeReturned, Error: reason}, reason
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
