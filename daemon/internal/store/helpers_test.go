package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/migrations"
)

// ctx is a context for one call of a helper below.
func ctx(t *testing.T) context.Context { return testsvc.Context(t, 30*time.Second) }

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func incoming(topic string, offset int64, payload string) dlq.Incoming {
	return dlq.Incoming{
		Position:      dlq.LogPosition("kafka", topic, 0, offset),
		OriginalTopic: "orders.events.v1",
		ErrorMessage:  "processing failed",
		Key:           []byte("k1"),
		Headers:       []dlq.Header{{Key: []byte("error"), Value: []byte("processing failed")}},
		Payload:       []byte(payload),
	}
}

func ingest(t *testing.T, s store.Store, now time.Time, in ...dlq.Incoming) dlq.IngestResult {
	t.Helper()
	res, err := s.IngestDLQ(ctx(t), in, dlq.IngestOptions{Now: now, MaxRetries: 3})
	require.NoError(t, err)
	return res
}

// at is a FirstRetryAt that gives every message t.
func at(t time.Time) func() *time.Time { return func() *time.Time { return &t } }

func onlyMessage(t *testing.T, s store.Store, topic string) dlq.Message {
	t.Helper()
	msgs, total, err := s.ListDLQ(ctx(t), dlq.ListFilter{Topic: topic, Page: 1, PageSize: 10})
	require.NoError(t, err)
	require.EqualValues(t, 1, total)
	require.Len(t, msgs, 1)
	return msgs[0]
}

// stored stores one message on topic and returns it.
func stored(t *testing.T, s store.Store, topic string) dlq.Message {
	t.Helper()
	ingest(t, s, t0, incoming(topic, 1, `{}`))
	return onlyMessage(t, s, topic)
}

// claimed claims the message id under c.
func claimed(t *testing.T, s store.Store, id uuid.UUID, c dlq.Claim) *dlq.Message {
	t.Helper()
	m, err := s.ClaimDLQ(ctx(t), id, c)
	require.NoError(t, err)
	return m
}

// ended is the outcome of e for m, a message as it was claimed.
func ended(m *dlq.Message, e dlq.Event) []dlq.Outcome { return []dlq.Outcome{dlq.Finish(*m, e)} }

// finished records outcomes for owner and returns what was recorded.
func finished(t *testing.T, s store.Store, owner string, now time.Time, outcomes []dlq.Outcome) []dlq.Recorded {
	t.Helper()
	got, err := s.FinishDLQ(ctx(t), owner, now, outcomes)
	require.NoError(t, err)
	require.Len(t, got, len(outcomes))
	return got
}

// resolve claims a message and records the broker's acknowledgement.
func resolve(t *testing.T, s store.Store, id uuid.UUID, at time.Time) {
	t.Helper()
	m, err := s.ClaimDLQ(ctx(t), id, dlq.Claim{Owner: "d", Now: at, LeaseUntil: at.Add(time.Minute)})
	require.NoError(t, err)
	o := dlq.Finish(*m, dlq.EventAcked)
	o.At, o.Trigger, o.Attempted = at, dlq.TriggerManual, true
	got := finished(t, s, "d", at, []dlq.Outcome{o})
	require.True(t, got[0].Applied)
}

// exec runs raw SQL against either store, for states the store's own
// methods cannot produce (rows from before a fix).
func exec(t *testing.T, s store.Store, postgresSQL, sqliteSQL string, args ...any) {
	t.Helper()
	var err error
	switch x := s.(type) {
	case *store.Postgres:
		_, err = x.Pool().Exec(ctx(t), postgresSQL, args...)
	case *store.SQLite:
		_, err = x.DB().ExecContext(ctx(t), sqliteSQL, args...)
	}
	require.NoError(t, err)
}

func count(t *testing.T, s store.Store, postgresSQL, sqliteSQL string) int {
	t.Helper()
	var n int
	var err error
	switch x := s.(type) {
	case *store.Postgres:
		err = x.Pool().QueryRow(ctx(t), postgresSQL).Scan(&n)
	case *store.SQLite:
		err = x.DB().QueryRowContext(ctx(t), sqliteSQL).Scan(&n)
	}
	require.NoError(t, err)
	return n
}

// sqlTime is t as raw SQL stores it: microseconds in SQLite.
func sqlTime(s store.Store, t time.Time) any {
	if s.Dialect() == migrations.SQLite {
		return t.UnixMicro()
	}
	return t
}
