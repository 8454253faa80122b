// Package dlqtest is what the tests of the dead-letter packages (dlq,
// intake, bulk) share: a broker standing in for a source plugin, a
// settable clock, and a fixture that runs a test on a fresh SQLite and a
// fresh PostgreSQL state store.
package dlqtest

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/bulk"
	"github.com/lifecycled/lifecycled/daemon/internal/periodic"
	"github.com/lifecycled/lifecycled/daemon/internal/retry"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// Fixture is daemon-a on a state store, with one source ("kafka") whose
// broker is Broker, and the test's clock.
type Fixture struct {
	Store  store.Store
	Broker *Broker
	// Sources are daemon-a's sources: Sources{Broker} unless a test sets
	// others and calls Reconfigure.
	Sources dlq.Sources
	Svc     *dlq.Service
	Ops     *bulk.Service
	Clock   *Clock
	Policy  dlq.Policy
	// opts are daemon-a's options so far (Reconfigure).
	opts []dlq.Option
}

// BackoffPolicy is exact (no jitter) so the schedule can be asserted:
// 1m, 2m, 4m, ...
var BackoffPolicy = retry.Policy{Initial: time.Minute, Multiplier: 2, Max: time.Hour, Jitter: retry.JitterNone}

// Each runs fn on a fresh SQLite and a fresh PostgreSQL state store
// (those LIFECYCLED_TEST_STORES names), with automatic retries on when
// auto.
func Each(t *testing.T, auto bool, fn func(t *testing.T, f *Fixture)) {
	storetest.Each(t, func(t *testing.T, _ context.Context, st store.Store) {
		fn(t, New(t, st, dlq.Policy{AutoRetry: auto, MaxRetries: 3, Backoff: BackoffPolicy, Lease: 30 * time.Second}))
	})
}

// New is a fixture on st with policy.
func New(t *testing.T, st store.Store, policy dlq.Policy) *Fixture {
	f := &Fixture{Store: st, Broker: NewBroker(), Clock: NewClock(T0), Policy: policy}
	f.Sources = Sources{f.Broker}
	f.Reconfigure(t)
	return f
}

// Daemon is a daemon named name on st with sources, on the fixture's
// policy and clock: its manager and its bulk operations (no runner).
func (f *Fixture) Daemon(t *testing.T, name string, st dlq.Store, sources dlq.Sources, opts ...dlq.Option) (*dlq.Service, *bulk.Service) {
	log := DaemonLog(t, name)
	svc := dlq.NewService(st, sources, func() dlq.Policy { return f.Policy }, name, log,
		dlq.NewMetrics(nil, st, nil, periodic.New(nil)), append([]dlq.Option{dlq.WithClock(f.Clock.Now)}, opts...)...)
	return svc, bulk.NewService(svc, st, log)
}

// Reconfigure makes daemon-a anew, on f.Sources and with opts beside
// those of earlier calls, before it ran anything.
func (f *Fixture) Reconfigure(t *testing.T, opts ...dlq.Option) {
	f.opts = append(f.opts, opts...)
	f.Svc, f.Ops = f.Daemon(t, "daemon-a", f.Store, f.Sources, f.opts...)
}

// Ingest stores n dead letters of orders.dlq.v1 (offsets from 0) and
// returns their ids, newest first.
func (f *Fixture) Ingest(t *testing.T, n int) []uuid.UUID {
	t.Helper()
	batch := make([]dlq.Incoming, n)
	for i := range batch {
		batch[i] = dlq.Incoming{
			Position:      dlq.LogPosition("kafka", "orders.dlq.v1", 0, int64(i)),
			OriginalTopic: "orders.events.v1",
			ErrorMessage:  "boom",
			Key:           []byte(fmt.Sprintf("k%d", i)),
			Headers:       []dlq.Header{{Key: []byte("trace-id"), Value: []byte("abc")}},
			Payload:       []byte(fmt.Sprintf(`{"n":%d}`, i)),
		}
	}
	opts := dlq.IngestOptions{Now: f.Clock.Now(), MaxRetries: f.Policy.MaxRetries}
	if f.Policy.AutoRetry {
		first := f.Clock.Now().Add(f.Policy.Backoff.Delay(0))
		opts.FirstRetryAt = func() *time.Time { return &first }
	}
	_, err := f.Store.IngestDLQ(testsvc.Context(t, 30*time.Second), batch, opts)
	require.NoError(t, err)
	msgs, total, err := f.Store.ListDLQ(testsvc.Context(t, 30*time.Second), dlq.ListFilter{Topic: "orders.dlq.v1", Page: 1, PageSize: 1000})
	require.NoError(t, err)
	require.EqualValues(t, n, total)
	ids := make([]uuid.UUID, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return ids
}

// IngestTo stores n dead letters of dlqTopic failed with errText, at
// offsets from base, and returns their ids.
func (f *Fixture) IngestTo(t *testing.T, dlqTopic, original, errText string, base, n int) []uuid.UUID {
	t.Helper()
	ctx := testsvc.Context(t, 30*time.Second)
	batch := make([]dlq.Incoming, n)
	for i := range batch {
		batch[i] = dlq.Incoming{
			Position:      dlq.LogPosition("kafka", dlqTopic, 0, int64(base+i)),
			OriginalTopic: original, ErrorMessage: errText,
			Key: []byte(fmt.Sprintf("k%d", base+i)), Payload: []byte(fmt.Sprintf(`{"n":%d}`, base+i)),
		}
	}
	_, err := f.Store.IngestDLQ(ctx, batch, dlq.IngestOptions{Now: f.Clock.Now(), MaxRetries: f.Policy.MaxRetries})
	require.NoError(t, err)
	page, err := f.Store.SearchDLQ(ctx, dlq.SearchFilter{Topic: dlqTopic, Limit: 1000, OldestFirst: true})
	require.NoError(t, err)
	var ids []uuid.UUID
	for _, m := range page.Messages {
		if off := m.Position.Offset(); off >= int64(base) && off < int64(base+n) {
			ids = append(ids, m.ID)
		}
	}
	require.Len(t, ids, n)
	return ids
}

// Get is one stored message.
func (f *Fixture) Get(t *testing.T, id uuid.UUID) *dlq.Message {
	t.Helper()
	m, err := f.Svc.Get(testsvc.Context(t, 30*time.Second), id)
	require.NoError(t, err)
	return m
}

// Everything is every stored message of orders.dlq.v1 as the store has it.
func (f *Fixture) Everything(t *testing.T) map[uuid.UUID]dlq.Message {
	t.Helper()
	msgs, _, err := f.Store.ListDLQ(testsvc.Context(t, 30*time.Second), dlq.ListFilter{Topic: "orders.dlq.v1", Page: 1, PageSize: 1000})
	require.NoError(t, err)
	out := map[uuid.UUID]dlq.Message{}
	for _, m := range msgs {
		out[m.ID] = m
	}
	return out
}

// History is the history of message id.
func (f *Fixture) History(t *testing.T, id uuid.UUID) []dlq.HistoryEvent {
	t.Helper()
	h, err := f.Svc.History(testsvc.Context(t, 30*time.Second), id)
	require.NoError(t, err)
	return h
}

// RequireUntouched checks that the messages ids are as they were in
// before (checksums taken earlier): the bystanders of what a test did.
func (f *Fixture) RequireUntouched(t *testing.T, before map[uuid.UUID]string, ids []uuid.UUID) {
	t.Helper()
	after := f.Checksums(t)
	for _, id := range ids {
		require.Equal(t, before[id], after[id], "message %s is a bystander: it must not change", id)
	}
}

// Checksums is every stored message (live and archived) by id, as a digest
// of everything an operation could change.
func (f *Fixture) Checksums(t *testing.T) map[uuid.UUID]string {
	t.Helper()
	page, err := f.Store.SearchDLQ(testsvc.Context(t, 30*time.Second), dlq.SearchFilter{Limit: 1000, IncludeArchived: true})
	require.NoError(t, err)
	require.Nil(t, page.Next, "the fixture fits one page")
	out := map[uuid.UUID]string{}
	for _, m := range page.Messages {
		b, err := json.Marshal(struct {
			S                         dlq.Status
			C, M                      int
			K, P                      []byte
			H                         []dlq.Header
			E, L                      string
			A                         []dlq.Attempt
			Next                      *time.Time
			Archived                  bool
			OriginalTopic, Source, DT string
		}{m.Status, m.RetryCount, m.MaxRetries, m.Key, m.Payload, m.Headers, m.ErrorMessage, m.LastError, m.Attempts, m.NextRetryAt,
			m.Archived, m.OriginalTopic, m.Position.Source, m.Position.Topic})
		require.NoError(t, err)
		out[m.ID] = fmt.Sprintf("%x", sha256.Sum256(b))
	}
	return out
}

// Without is sums without the ids.
func Without(sums map[uuid.UUID]string, ids ...[]uuid.UUID) map[uuid.UUID]string {
	out := map[uuid.UUID]string{}
	for k, v := range sums {
		out[k] = v
	}
	for _, l := range ids {
		for _, id := range l {
			delete(out, id)
		}
	}
	return out
}

// DaemonLog is a daemon's logger in a test: what it logged is printed
// when the test fails, since a daemon's warnings (an outage that kept an
// operation's lease, a claim that was lost) say why an operation stalled.
// Goroutines that outlive the test still write to the buffer, never to t.
func DaemonLog(t *testing.T, name string) hclog.Logger {
	out := &testsvc.SyncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s logged:\n%s", name, out.String())
		}
	})
	return hclog.New(&hclog.LoggerOptions{Name: name, Output: out, Level: hclog.Info})
}

// FmtTime is t for a failure message.
func FmtTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339Nano)
}
