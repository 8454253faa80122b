package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/idempotency"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/migrations"
)

// openStore opens a fresh store of the dialect for one test.
func openStore(t *testing.T, d migrations.Dialect) store.Store {
	t.Helper()
	ctx := testsvc.Context(t, 30*time.Second)
	var dsn string
	switch d {
	case migrations.SQLite:
		dsn = filepath.Join(t.TempDir(), "state.db")
	case migrations.Postgres:
		dsn = testsvc.PGDatabase(t)
	}
	s, err := store.Open(ctx, d, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// contract runs fn against both implementations: one contract, two stores.
func contract(t *testing.T, fn func(t *testing.T, s store.Store)) {
	for _, d := range []migrations.Dialect{migrations.SQLite, migrations.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			fn(t, openStore(t, d))
		})
	}
}

func ctx(t *testing.T) context.Context { return testsvc.Context(t, 30*time.Second) }

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func incoming(topic string, offset int64, payload string) dlq.Incoming {
	return dlq.Incoming{
		Position:      dlq.Position{Source: "kafka", Topic: topic, Partition: 0, Offset: offset},
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

func TestMigrationsStatusAndNewerSchemaRefused(t *testing.T) {
	for _, d := range []migrations.Dialect{migrations.SQLite, migrations.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			c := ctx(t)
			var dsn string
			if d == migrations.SQLite {
				dsn = filepath.Join(t.TempDir(), "s.db")
			} else {
				dsn = testsvc.PGDatabase(t)
			}
			st, err := store.MigrationStatus(c, d, dsn)
			require.NoError(t, err)
			require.EqualValues(t, 0, st.Current)
			require.NotEmpty(t, st.Pending)

			st, err = store.MigrateUp(c, d, dsn)
			require.NoError(t, err)
			require.Equal(t, st.Latest, st.Current)
			require.Empty(t, st.Pending)

			// Up again changes nothing.
			st2, err := store.MigrateUp(c, d, dsn)
			require.NoError(t, err)
			require.Equal(t, st, st2)

			// A newer lifecycled migrated this database: refuse to run on it.
			s, err := store.Open(c, d, dsn)
			require.NoError(t, err)
			bump := fmt.Sprintf("UPDATE %s SET version = 999", migrations.Table)
			switch x := s.(type) {
			case *store.SQLite:
				_, err = x.DB().ExecContext(c, bump)
			case *store.Postgres:
				_, err = x.Pool().Exec(c, bump)
			}
			require.NoError(t, err)
			s.Close()
			_, err = store.Open(c, d, dsn)
			require.ErrorIs(t, err, migrations.ErrSchemaNewer)
			require.ErrorContains(t, err, "version 999")
			require.ErrorContains(t, err, "upgrade lifecycled")
		})
	}
}

func TestIngestIsIdempotentPerPosition(t *testing.T) {
	contract(t, func(t *testing.T, s store.Store) {
		res := ingest(t, s, t0, incoming("orders.dlq.v1", 1, `{"order_id":"123"}`), incoming("orders.dlq.v1", 2, "not json \x00\xff"))
		require.Equal(t, dlq.IngestResult{Inserted: 2}, res)
		// Redelivery of the same positions (a crash before the commit).
		res = ingest(t, s, t0.Add(time.Second), incoming("orders.dlq.v1", 1, `{"order_id":"123"}`), incoming("orders.dlq.v1", 2, "x"), incoming("orders.dlq.v1", 3, "{}"))
		require.Equal(t, dlq.IngestResult{Inserted: 1, Duplicates: 2}, res)

		msgs, total, err := s.ListDLQ(ctx(t), dlq.ListFilter{Topic: "orders.dlq.v1", Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.EqualValues(t, 3, total)
		require.Len(t, msgs, 3)
		byOffset := map[int64]dlq.Message{}
		for _, m := range msgs {
			byOffset[m.Position.Offset] = m
		}
		m := byOffset[2]
		require.Equal(t, []byte("not json \x00\xff"), m.Payload, "non-JSON payload kept byte for byte")
		require.Equal(t, dlq.StatusPending, m.Status)
		require.Equal(t, 0, m.RetryCount)
		require.Equal(t, 3, m.MaxRetries)
		require.Equal(t, "orders.events.v1", m.OriginalTopic)
		require.Equal(t, []byte("k1"), m.Key)
		require.Equal(t, []dlq.Header{{Key: []byte("error"), Value: []byte("processing failed")}}, m.Headers)
		require.True(t, m.CreatedAt.Equal(t0), "created_at %v", m.CreatedAt)
	})
}

func TestListPagingOrderStatusAndTopicMatching(t *testing.T) {
	contract(t, func(t *testing.T, s store.Store) {
		for i := 0; i < 25; i++ {
			in := incoming("orders.dlq.v1", int64(i), fmt.Sprintf(`{"n":%d}`, i))
			ingest(t, s, t0.Add(time.Duration(i)*time.Second), in)
		}
		other := incoming("payments.dlq.v1", 0, `{}`)
		other.OriginalTopic = "payments.events.v1"
		ingest(t, s, t0, other)

		page1, total, err := s.ListDLQ(ctx(t), dlq.ListFilter{Topic: "orders.dlq.v1", Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.EqualValues(t, 25, total)
		require.Len(t, page1, 10)
		require.EqualValues(t, 24, page1[0].Position.Offset, "newest first")
		page3, _, err := s.ListDLQ(ctx(t), dlq.ListFilter{Topic: "orders.dlq.v1", Page: 3, PageSize: 10})
		require.NoError(t, err)
		require.Len(t, page3, 5)
		require.EqualValues(t, 0, page3[4].Position.Offset)
		page4, _, err := s.ListDLQ(ctx(t), dlq.ListFilter{Topic: "orders.dlq.v1", Page: 4, PageSize: 10})
		require.NoError(t, err)
		require.Empty(t, page4)

		// The original topic finds the same messages.
		_, total, err = s.ListDLQ(ctx(t), dlq.ListFilter{Topic: "orders.events.v1", Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.EqualValues(t, 25, total)

		// Status filter.
		_, err = s.ClaimDLQ(ctx(t), page1[0].ID, dlq.Claim{Owner: "a", Now: t0, LeaseUntil: t0.Add(time.Minute)})
		require.NoError(t, err)
		retrying, total, err := s.ListDLQ(ctx(t), dlq.ListFilter{Topic: "orders.dlq.v1", Status: dlq.StatusRetrying, Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.EqualValues(t, 1, total)
		require.Equal(t, page1[0].ID, retrying[0].ID)

		empty, total, err := s.ListDLQ(ctx(t), dlq.ListFilter{Topic: "nothing.dlq.v1", Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.Zero(t, total)
		require.Empty(t, empty)

		topics, err := s.DLQTopics(ctx(t))
		require.NoError(t, err)
		require.Len(t, topics, 2)
		require.Equal(t, "orders.dlq.v1", topics[0].Topic)
		require.EqualValues(t, 24, topics[0].Counts[dlq.StatusPending])
		require.EqualValues(t, 1, topics[0].Counts[dlq.StatusRetrying])
		require.EqualValues(t, 0, topics[0].Counts[dlq.StatusDead])
		require.NotNil(t, topics[0].OldestPendingAt)
		require.True(t, topics[0].OldestPendingAt.Equal(t0), "%v", topics[0].OldestPendingAt)
	})
}

func TestGetDeleteNotFound(t *testing.T) {
	contract(t, func(t *testing.T, s store.Store) {
		ingest(t, s, t0, incoming("a.dlq.v1", 1, `{}`))
		m := onlyMessage(t, s, "a.dlq.v1")
		got, err := s.GetDLQ(ctx(t), m.ID)
		require.NoError(t, err)
		require.Equal(t, m.ID, got.ID)
		require.NoError(t, s.DeleteDLQ(ctx(t), m.ID))
		_, err = s.GetDLQ(ctx(t), m.ID)
		require.ErrorIs(t, err, derrors.ErrNotFound)
		require.ErrorIs(t, s.DeleteDLQ(ctx(t), m.ID), derrors.ErrNotFound)
		_, err = s.ClaimDLQ(ctx(t), uuid.New(), dlq.Claim{Owner: "a", Now: t0, LeaseUntil: t0})
		require.ErrorIs(t, err, derrors.ErrNotFound)
		topics, err := s.DLQTopics(ctx(t))
		require.NoError(t, err)
		require.Empty(t, topics, "counts follow deletes")
	})
}

func TestClaimFinishStateMachine(t *testing.T) {
	contract(t, func(t *testing.T, s store.Store) {
		ingest(t, s, t0, incoming("a.dlq.v1", 1, `{}`))
		m := onlyMessage(t, s, "a.dlq.v1")
		claim := dlq.Claim{Owner: "daemon-1", Now: t0, LeaseUntil: t0.Add(time.Minute)}

		got, err := s.ClaimDLQ(ctx(t), m.ID, claim)
		require.NoError(t, err)
		require.Equal(t, dlq.StatusRetrying, got.Status)
		require.NotNil(t, got.LastRetryAt)

		// A second claim while the lease is held is a conflict.
		_, err = s.ClaimDLQ(ctx(t), m.ID, dlq.Claim{Owner: "daemon-2", Now: t0.Add(time.Second), LeaseUntil: t0.Add(time.Hour)})
		var nre *dlq.NotRetryableError
		require.ErrorAs(t, err, &nre)
		require.Contains(t, nre.Reason, "being retried")

		// Only the lease owner can finish it.
		require.NoError(t, s.FinishDLQ(ctx(t), "daemon-2", t0, []dlq.Outcome{{ID: m.ID, Acked: true}}))
		cur, _ := s.GetDLQ(ctx(t), m.ID)
		require.Equal(t, dlq.StatusRetrying, cur.Status)

		// A failed attempt counts and goes back to PENDING with its next retry.
		next := t0.Add(2 * time.Minute)
		require.NoError(t, s.FinishDLQ(ctx(t), "daemon-1", t0, []dlq.Outcome{{ID: m.ID, Counted: true, NextRetryAt: &next}}))
		cur, _ = s.GetDLQ(ctx(t), m.ID)
		require.Equal(t, dlq.StatusPending, cur.Status)
		require.Equal(t, 1, cur.RetryCount)
		require.True(t, cur.NextRetryAt.Equal(next))

		// Source unavailable: back to PENDING, not counted.
		_, err = s.ClaimDLQ(ctx(t), m.ID, claim)
		require.NoError(t, err)
		require.NoError(t, s.FinishDLQ(ctx(t), "daemon-1", t0, []dlq.Outcome{{ID: m.ID, Counted: false}}))
		cur, _ = s.GetDLQ(ctx(t), m.ID)
		require.Equal(t, dlq.StatusPending, cur.Status)
		require.Equal(t, 1, cur.RetryCount)

		// Two more counted failures reach max_retries: DEAD.
		for i := 0; i < 2; i++ {
			_, err = s.ClaimDLQ(ctx(t), m.ID, claim)
			require.NoError(t, err)
			require.NoError(t, s.FinishDLQ(ctx(t), "daemon-1", t0, []dlq.Outcome{{ID: m.ID, Counted: true}}))
		}
		cur, _ = s.GetDLQ(ctx(t), m.ID)
		require.Equal(t, dlq.StatusDead, cur.Status)
		require.Equal(t, 3, cur.RetryCount)
		_, err = s.ClaimDLQ(ctx(t), m.ID, claim)
		require.ErrorAs(t, err, &nre)
		require.Equal(t, "message is not retryable: status=DEAD, retry_count=3/3", nre.Reason)
	})
}

func TestClaimAckResolves(t *testing.T) {
	contract(t, func(t *testing.T, s store.Store) {
		ingest(t, s, t0, incoming("a.dlq.v1", 1, `{}`))
		m := onlyMessage(t, s, "a.dlq.v1")
		claim := dlq.Claim{Owner: "d", Now: t0, LeaseUntil: t0.Add(time.Minute)}
		_, err := s.ClaimDLQ(ctx(t), m.ID, claim)
		require.NoError(t, err)
		require.NoError(t, s.FinishDLQ(ctx(t), "d", t0, []dlq.Outcome{{ID: m.ID, Acked: true}}))
		cur, _ := s.GetDLQ(ctx(t), m.ID)
		require.Equal(t, dlq.StatusResolved, cur.Status)
		_, err = s.ClaimDLQ(ctx(t), m.ID, claim)
		var nre *dlq.NotRetryableError
		require.ErrorAs(t, err, &nre)
		require.Equal(t, "message is not retryable: status=RESOLVED, retry_count=0/3", nre.Reason)
	})
}

func TestConcurrentClaimsHaveOneWinner(t *testing.T) {
	contract(t, func(t *testing.T, s store.Store) {
		ingest(t, s, t0, incoming("a.dlq.v1", 1, `{}`))
		m := onlyMessage(t, s, "a.dlq.v1")
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for i := 0; i < 10; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				_, err := s.ClaimDLQ(ctx(t), m.ID, dlq.Claim{Owner: fmt.Sprint(i), Now: t0, LeaseUntil: t0.Add(time.Minute)})
				if err == nil {
					mu.Lock()
					wins++
					mu.Unlock()
				}
			}(i)
		}
		wg.Wait()
		require.Equal(t, 1, wins)
	})
}

// Claims and mixed outcomes of one topic running at once, as retry-all's
// workers do, must neither fail nor lose a message. Recording acked and
// refused outcomes in separate statements deadlocked on PostgreSQL's
// per-topic counter rows.
func TestConcurrentClaimsAndMixedOutcomesNeverFail(t *testing.T) {
	contract(t, func(t *testing.T, s store.Store) {
		const n = 600
		batch := make([]dlq.Incoming, n)
		for i := range batch {
			batch[i] = incoming("a.dlq.v1", int64(i), `{}`)
		}
		ingest(t, s, t0, batch...)
		claims := make(chan []dlq.Message, 4)
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(claims)
			var cursor *dlq.Cursor
			for {
				page, err := s.ClaimDLQTopic(ctx(t), "a.dlq.v1", cursor, 20, dlq.Claim{Owner: "d", Now: t0, LeaseUntil: t0.Add(time.Hour)})
				if err != nil {
					errs <- err
					return
				}
				if len(page) == 0 {
					return
				}
				last := page[len(page)-1]
				cursor = &dlq.Cursor{CreatedAt: last.CreatedAt, ID: last.ID}
				claims <- page
			}
		}()
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for page := range claims {
					outs := make([]dlq.Outcome, len(page))
					for i, m := range page {
						outs[i] = dlq.Outcome{ID: m.ID, Acked: i%3 != 0, Counted: i%3 == 0}
					}
					if err := s.FinishDLQ(ctx(t), "d", t0.Add(time.Second), outs); err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		_, resolved, err := s.ListDLQ(ctx(t), dlq.ListFilter{Topic: "a.dlq.v1", Status: dlq.StatusResolved, Page: 1, PageSize: 1})
		require.NoError(t, err)
		_, retrying, err := s.ListDLQ(ctx(t), dlq.ListFilter{Topic: "a.dlq.v1", Status: dlq.StatusRetrying, Page: 1, PageSize: 1})
		require.NoError(t, err)
		_, pending, err := s.ListDLQ(ctx(t), dlq.ListFilter{Topic: "a.dlq.v1", Status: dlq.StatusPending, Page: 1, PageSize: 1})
		require.NoError(t, err)
		require.Zero(t, retrying, "every claimed message has its outcome")
		require.EqualValues(t, n, resolved+pending, "none lost")
		require.Greater(t, pending, int64(0), "refused ones are PENDING again, with the claimer walking on past them")
	})
}

func TestExpiredLeasesReleased(t *testing.T) {
	contract(t, func(t *testing.T, s store.Store) {
		ingest(t, s, t0, incoming("a.dlq.v1", 1, `{}`), incoming("a.dlq.v1", 2, `{}`))
		msgs, _, _ := s.ListDLQ(ctx(t), dlq.ListFilter{Topic: "a.dlq.v1", Page: 1, PageSize: 10})
		_, err := s.ClaimDLQ(ctx(t), msgs[0].ID, dlq.Claim{Owner: "dead-daemon", Now: t0, LeaseUntil: t0.Add(time.Minute)})
		require.NoError(t, err)
		_, err = s.ClaimDLQ(ctx(t), msgs[1].ID, dlq.Claim{Owner: "live", Now: t0, LeaseUntil: t0.Add(time.Hour)})
		require.NoError(t, err)

		n, err := s.ReleaseExpiredDLQLeases(ctx(t), t0.Add(30*time.Second))
		require.NoError(t, err)
		require.Zero(t, n)
		n, err = s.ReleaseExpiredDLQLeases(ctx(t), t0.Add(2*time.Minute))
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		cur, _ := s.GetDLQ(ctx(t), msgs[0].ID)
		require.Equal(t, dlq.StatusPending, cur.Status)
		require.Equal(t, 0, cur.RetryCount, "a daemon's death is not the message's failure")
		cur, _ = s.GetDLQ(ctx(t), msgs[1].ID)
		require.Equal(t, dlq.StatusRetrying, cur.Status)
		// The dead daemon's late finish changes nothing.
		require.NoError(t, s.FinishDLQ(ctx(t), "dead-daemon", t0, []dlq.Outcome{{ID: msgs[0].ID, Acked: true}}))
		cur, _ = s.GetDLQ(ctx(t), msgs[0].ID)
		require.Equal(t, dlq.StatusPending, cur.Status)
	})
}

func TestClaimTopicWalksInOrderAndSkips(t *testing.T) {
	contract(t, func(t *testing.T, s store.Store) {
		for i := 0; i < 7; i++ {
			ingest(t, s, t0.Add(time.Duration(i)*time.Second), incoming("a.dlq.v1", int64(i), `{}`))
		}
		all, _, _ := s.ListDLQ(ctx(t), dlq.ListFilter{Topic: "a.dlq.v1", Page: 1, PageSize: 10})
		// Make offset 3 RESOLVED: not retryable, skipped.
		var third uuid.UUID
		for _, m := range all {
			if m.Position.Offset == 3 {
				third = m.ID
			}
		}
		_, err := s.ClaimDLQ(ctx(t), third, dlq.Claim{Owner: "x", Now: t0, LeaseUntil: t0.Add(time.Minute)})
		require.NoError(t, err)
		require.NoError(t, s.FinishDLQ(ctx(t), "x", t0, []dlq.Outcome{{ID: third, Acked: true}}))

		claim := dlq.Claim{Owner: "all", Now: t0, LeaseUntil: t0.Add(time.Minute)}
		var got []int64
		var cursor *dlq.Cursor
		for {
			page, err := s.ClaimDLQTopic(ctx(t), "a.dlq.v1", cursor, 4, claim)
			require.NoError(t, err)
			if len(page) == 0 {
				break
			}
			for _, m := range page {
				require.Equal(t, dlq.StatusRetrying, m.Status)
				got = append(got, m.Position.Offset)
			}
			last := page[len(page)-1]
			cursor = &dlq.Cursor{CreatedAt: last.CreatedAt, ID: last.ID}
			// Failing them returns them to PENDING, but the cursor has moved on.
			var outs []dlq.Outcome
			for _, m := range page {
				outs = append(outs, dlq.Outcome{ID: m.ID, Counted: true})
			}
			require.NoError(t, s.FinishDLQ(ctx(t), "all", t0, outs))
		}
		require.Equal(t, []int64{0, 1, 2, 4, 5, 6}, got)
		// By original topic too.
		page, err := s.ClaimDLQTopic(ctx(t), "orders.events.v1", nil, 100, claim)
		require.NoError(t, err)
		require.Len(t, page, 6)
	})
}

func TestClaimDueOnlyTakesDueMessages(t *testing.T) {
	contract(t, func(t *testing.T, s store.Store) {
		due, later := t0.Add(time.Minute), t0.Add(time.Hour)
		_, err := s.IngestDLQ(ctx(t), []dlq.Incoming{incoming("a.dlq.v1", 1, `{}`)}, dlq.IngestOptions{Now: t0, MaxRetries: 3, FirstRetryAt: at(due)})
		require.NoError(t, err)
		_, err = s.IngestDLQ(ctx(t), []dlq.Incoming{incoming("a.dlq.v1", 2, `{}`)}, dlq.IngestOptions{Now: t0, MaxRetries: 3, FirstRetryAt: at(later)})
		require.NoError(t, err)
		_, err = s.IngestDLQ(ctx(t), []dlq.Incoming{incoming("a.dlq.v1", 3, `{}`)}, dlq.IngestOptions{Now: t0, MaxRetries: 3})
		require.NoError(t, err)

		claim := dlq.Claim{Owner: "loop", Now: t0.Add(2 * time.Minute), LeaseUntil: t0.Add(3 * time.Minute)}
		got, err := s.ClaimDueDLQ(ctx(t), 10, claim)
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.EqualValues(t, 1, got[0].Position.Offset)
		got, err = s.ClaimDueDLQ(ctx(t), 10, claim)
		require.NoError(t, err)
		require.Empty(t, got, "a claimed message is not claimed twice")
	})
}

func TestFeedbackUpdatesTheSameRecord(t *testing.T) {
	contract(t, func(t *testing.T, s store.Store) {
		ingest(t, s, t0, incoming("a.dlq.v1", 1, `{}`))
		m := onlyMessage(t, s, "a.dlq.v1")
		_, err := s.ClaimDLQ(ctx(t), m.ID, dlq.Claim{Owner: "d", Now: t0, LeaseUntil: t0.Add(time.Minute)})
		require.NoError(t, err)
		require.NoError(t, s.FinishDLQ(ctx(t), "d", t0, []dlq.Outcome{{ID: m.ID, Acked: true}}))

		back := incoming("a.dlq.v1", 10, `{}`)
		back.ErrorMessage = "failed again"
		back.FeedbackOf = &m.ID
		next := t0.Add(time.Hour)
		opts := dlq.IngestOptions{Now: t0.Add(time.Minute), MaxRetries: 3, FeedbackRetryAt: func(n int) *time.Time {
			require.Equal(t, 1, n)
			return &next
		}}
		res, err := s.IngestDLQ(ctx(t), []dlq.Incoming{back}, opts)
		require.NoError(t, err)
		require.Equal(t, dlq.IngestResult{Feedback: 1}, res)
		// Redelivered feedback is not counted twice.
		res, err = s.IngestDLQ(ctx(t), []dlq.Incoming{back}, opts)
		require.NoError(t, err)
		require.Equal(t, dlq.IngestResult{Duplicates: 1}, res)

		cur := onlyMessage(t, s, "a.dlq.v1")
		require.Equal(t, m.ID, cur.ID)
		require.Equal(t, dlq.StatusPending, cur.Status)
		require.Equal(t, 1, cur.RetryCount)
		require.Equal(t, "failed again", cur.ErrorMessage)
		require.True(t, cur.NextRetryAt.Equal(next))

		// Feedback for an unknown record is stored as a new message.
		ghost := uuid.New()
		orphan := incoming("a.dlq.v1", 11, `{}`)
		orphan.FeedbackOf = &ghost
		res, err = s.IngestDLQ(ctx(t), []dlq.Incoming{orphan}, opts)
		require.NoError(t, err)
		require.Equal(t, dlq.IngestResult{Inserted: 1}, res)

		// Two more returns reach max_retries.
		for i := 0; i < 2; i++ {
			b := back
			b.Position.Offset = int64(20 + i)
			res, err = s.IngestDLQ(ctx(t), []dlq.Incoming{b}, dlq.IngestOptions{Now: t0, MaxRetries: 3})
			require.NoError(t, err)
		}
		require.Equal(t, 1, res.Dead)
		got, _ := s.GetDLQ(ctx(t), m.ID)
		require.Equal(t, dlq.StatusDead, got.Status)
		require.Equal(t, 3, got.RetryCount)
	})
}

func TestDeletionJobs(t *testing.T) {
	contract(t, func(t *testing.T, s store.Store) {
		tenant := uuid.NewString()
		job, created, err := s.CreateDeletionJob(ctx(t), tenant, []string{"redis:sessions", "postgres:app"}, t0)
		require.NoError(t, err)
		require.True(t, created)
		require.Equal(t, deletion.JobPending, job.Status)
		require.Len(t, job.Deleters, 2)

		again, created, err := s.CreateDeletionJob(ctx(t), tenant, []string{"x"}, t0.Add(time.Second))
		require.NoError(t, err)
		require.False(t, created, "an active job is returned, not duplicated")
		require.Equal(t, job.ID, again.ID)

		claimed, err := s.ClaimDeletionJob(ctx(t), "d1", t0, t0.Add(30*time.Second))
		require.NoError(t, err)
		require.NotNil(t, claimed)
		require.Equal(t, job.ID, claimed.ID)
		require.Equal(t, deletion.JobRunning, claimed.Status)
		require.Equal(t, 1, claimed.Attempts)

		none, err := s.ClaimDeletionJob(ctx(t), "d2", t0.Add(time.Second), t0.Add(time.Minute))
		require.NoError(t, err)
		require.Nil(t, none, "a leased job is not claimed twice")

		require.NoError(t, s.SetDeleterState(ctx(t), job.ID, "d1", deletion.DeleterState{Name: "redis:sessions", Status: deletion.DeleterSucceeded, DeletedCount: 42, Total: 42, Attempts: 1, UpdatedAt: t0}))
		require.NoError(t, s.SetDeleterState(ctx(t), job.ID, "d1", deletion.DeleterState{Name: "postgres:app", Status: deletion.DeleterFailed, DeletedCount: 5, Total: -1, Attempts: 1, Error: "connection refused", UpdatedAt: t0}))
		require.ErrorIs(t, s.SetDeleterState(ctx(t), job.ID, "d2", deletion.DeleterState{Name: "x", Status: deletion.DeleterFailed, UpdatedAt: t0}), derrors.ErrLeaseLost)
		require.ErrorIs(t, s.RenewDeletionLease(ctx(t), job.ID, "d2", t0.Add(time.Hour)), derrors.ErrLeaseLost)
		require.NoError(t, s.RenewDeletionLease(ctx(t), job.ID, "d1", t0.Add(time.Minute)))

		next := t0.Add(time.Minute)
		require.NoError(t, s.FinishDeletionAttempt(ctx(t), job.ID, "d1", deletion.JobUpdate{Status: deletion.JobPartial, LastError: "1 deleter failed", NextAttemptAt: &next, Now: t0}))
		latest, err := s.LatestDeletionJob(ctx(t), tenant)
		require.NoError(t, err)
		require.Equal(t, deletion.JobPartial, latest.Status)
		require.Equal(t, "1 deleter failed", latest.LastError)
		require.Equal(t, deletion.DeleterFailed, latest.Deleters[0].Status)
		require.Equal(t, "connection refused", latest.Deleters[0].Error)
		require.EqualValues(t, 42, latest.Deleters[1].DeletedCount)
		require.EqualValues(t, 42, latest.Deleters[1].Total)
		require.EqualValues(t, -1, latest.Deleters[0].Total, "unknown total")

		// Not due yet.
		none, err = s.ClaimDeletionJob(ctx(t), "d2", t0.Add(30*time.Second), t0.Add(time.Hour))
		require.NoError(t, err)
		require.Nil(t, none)
		// Due: d2 claims; d2 then dies, and d3 takes over after the lease.
		claimed, err = s.ClaimDeletionJob(ctx(t), "d2", t0.Add(2*time.Minute), t0.Add(3*time.Minute))
		require.NoError(t, err)
		require.NotNil(t, claimed)
		require.Equal(t, 2, claimed.Attempts)
		none, err = s.ClaimDeletionJob(ctx(t), "d3", t0.Add(150*time.Second), t0.Add(time.Hour))
		require.NoError(t, err)
		require.Nil(t, none)
		claimed, err = s.ClaimDeletionJob(ctx(t), "d3", t0.Add(4*time.Minute), t0.Add(5*time.Minute))
		require.NoError(t, err)
		require.NotNil(t, claimed)
		require.ErrorIs(t, s.FinishDeletionAttempt(ctx(t), job.ID, "d2", deletion.JobUpdate{Status: deletion.JobCompleted, Now: t0}), derrors.ErrLeaseLost)
		require.NoError(t, s.FinishDeletionAttempt(ctx(t), job.ID, "d3", deletion.JobUpdate{Status: deletion.JobCompleted, Verified: true, Now: t0.Add(5 * time.Minute)}))

		latest, err = s.LatestDeletionJob(ctx(t), tenant)
		require.NoError(t, err)
		require.Equal(t, deletion.JobCompleted, latest.Status)
		require.True(t, latest.Verified)
		require.NotNil(t, latest.FinishedAt)

		// A completed job does not block a new one.
		newer, created, err := s.CreateDeletionJob(ctx(t), tenant, []string{"redis:sessions"}, t0.Add(time.Hour))
		require.NoError(t, err)
		require.True(t, created)
		require.NotEqual(t, job.ID, newer.ID)
		latest, err = s.LatestDeletionJob(ctx(t), tenant)
		require.NoError(t, err)
		require.Equal(t, newer.ID, latest.ID)

		_, err = s.LatestDeletionJob(ctx(t), "no-such-tenant")
		require.ErrorIs(t, err, derrors.ErrNotFound)
	})
}

// TestMigrationsGoDownAndUpAgain checks every .down.sql file against its
// .up.sql: down to nothing, then up again, on both stores.
func TestMigrationsGoDownAndUpAgain(t *testing.T) {
	for _, d := range []migrations.Dialect{migrations.SQLite, migrations.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			c := ctx(t)
			dsn, driver := filepath.Join(t.TempDir(), "s.db"), "sqlite"
			if d == migrations.Postgres {
				dsn, driver = testsvc.PGDatabase(t), "pgx"
			}
			up, err := store.MigrateUp(c, d, dsn)
			require.NoError(t, err)
			db, err := sql.Open(driver, dsn)
			require.NoError(t, err)
			defer db.Close()
			require.NoError(t, migrations.Down(d, db))
			st, err := store.MigrationStatus(c, d, dsn)
			require.NoError(t, err)
			require.EqualValues(t, 0, st.Current)
			again, err := store.MigrateUp(c, d, dsn)
			require.NoError(t, err)
			require.Equal(t, up, again)
		})
	}
}

// TestDeletionJobBreakdown: a deleter's counts per table or key pattern
// and its verification survive the store as they were written, and a
// deleter that never reported one reads back as unknown (nil), not as zero.
func TestDeletionJobBreakdown(t *testing.T) {
	contract(t, func(t *testing.T, s store.Store) {
		tenant := uuid.NewString()
		job, _, err := s.CreateDeletionJob(ctx(t), tenant, []string{"postgres:app", "redis:sessions"}, t0)
		require.NoError(t, err)
		for _, d := range job.Deleters {
			require.Nil(t, d.TotalBreakdown, "%s: nothing counted yet", d.Name)
			require.Nil(t, d.DeletedBreakdown)
			require.Nil(t, d.Verification)
		}
		_, err = s.ClaimDeletionJob(ctx(t), "d1", t0, t0.Add(time.Minute))
		require.NoError(t, err)

		pg := deletion.DeleterState{Name: "postgres:app", Status: deletion.DeleterRunning, DeletedCount: 7, Total: 12, Attempts: 1, UpdatedAt: t0,
			TotalBreakdown:   map[string]int64{"public.steps": 8, `"Quoted"."Mixed Case"`: 4, "public.empty": 0},
			DeletedBreakdown: map[string]int64{"public.steps": 5, `"Quoted"."Mixed Case"`: 2, "public.empty": 0}}
		require.NoError(t, s.SetDeleterState(ctx(t), job.ID, "d1", pg))
		latest, err := s.LatestDeletionJob(ctx(t), tenant)
		require.NoError(t, err)
		require.Equal(t, pg.TotalBreakdown, latest.Deleters[0].TotalBreakdown)
		require.Equal(t, pg.DeletedBreakdown, latest.Deleters[0].DeletedBreakdown)
		require.Nil(t, latest.Deleters[0].Verification)
		require.Nil(t, latest.Deleters[1].DeletedBreakdown, "the other deleter is untouched")

		// The attempt ends; the verification is stored with the result.
		pg.Status, pg.DeletedCount = deletion.DeleterSucceeded, 12
		pg.DeletedBreakdown = map[string]int64{"public.steps": 8, `"Quoted"."Mixed Case"`: 4, "public.empty": 0}
		pg.Verification = &deletion.Verification{Count: 0, Breakdown: map[string]int64{"public.steps": 0, `"Quoted"."Mixed Case"`: 0, "public.empty": 0}}
		redis := deletion.DeleterState{Name: "redis:sessions", Status: deletion.DeleterSucceeded, DeletedCount: 3, Total: 3, Attempts: 1, UpdatedAt: t0,
			TotalBreakdown: map[string]int64{}, DeletedBreakdown: map[string]int64{},
			Verification: &deletion.Verification{Count: 0, Breakdown: map[string]int64{}}}
		require.NoError(t, s.SetDeleterState(ctx(t), job.ID, "d1", pg))
		require.NoError(t, s.SetDeleterState(ctx(t), job.ID, "d1", redis))
		require.ErrorIs(t, s.SetDeleterState(ctx(t), job.ID, "d2", pg), derrors.ErrLeaseLost, "no lease, no write")
		require.NoError(t, s.FinishDeletionAttempt(ctx(t), job.ID, "d1", deletion.JobUpdate{Status: deletion.JobCompleted, Verified: true, Now: t0}))

		latest, err = s.LatestDeletionJob(ctx(t), tenant)
		require.NoError(t, err)
		require.Equal(t, pg.DeletedBreakdown, latest.Deleters[0].DeletedBreakdown)
		require.Equal(t, pg.TotalBreakdown, latest.Deleters[0].TotalBreakdown)
		require.Equal(t, pg.Verification, latest.Deleters[0].Verification)
		require.Equal(t, map[string]int64{}, latest.Deleters[1].DeletedBreakdown, "known to be empty")
		require.Equal(t, redis.Verification, latest.Deleters[1].Verification)

		// A later write without a verification clears it: a verification
		// belongs to the deletes it followed.
		newer, _, err := s.CreateDeletionJob(ctx(t), tenant, []string{"postgres:app"}, t0.Add(time.Hour))
		require.NoError(t, err)
		_, err = s.ClaimDeletionJob(ctx(t), "d1", t0.Add(time.Hour), t0.Add(2*time.Hour))
		require.NoError(t, err)
		withV := deletion.DeleterState{Name: "postgres:app", Status: deletion.DeleterPending, Total: 1, UpdatedAt: t0,
			Verification: &deletion.Verification{Count: 1, Breakdown: map[string]int64{"public.steps": 1}}}
		require.NoError(t, s.SetDeleterState(ctx(t), newer.ID, "d1", withV))
		withV.Verification = nil
		require.NoError(t, s.SetDeleterState(ctx(t), newer.ID, "d1", withV))
		latest, err = s.LatestDeletionJob(ctx(t), tenant)
		require.NoError(t, err)
		require.Equal(t, newer.ID, latest.ID)
		require.Nil(t, latest.Deleters[0].Verification)
	})
}

func TestIdempotencyKeys(t *testing.T) {
	contract(t, func(t *testing.T, s store.Store) {
		rec := idempotency.Record{CallerUID: 1000, Key: "k-1", Route: "POST /x", RequestHash: "h1", ExpiresAt: t0.Add(72 * time.Hour)}
		stale := t0.Add(-5 * time.Minute)
		holder, err := s.ReserveIdempotencyKey(ctx(t), rec, t0, stale)
		require.NoError(t, err)
		require.Nil(t, holder, "first use reserves")

		holder, err = s.ReserveIdempotencyKey(ctx(t), rec, t0.Add(time.Second), stale)
		require.NoError(t, err)
		require.NotNil(t, holder)
		require.Equal(t, idempotency.StateInFlight, holder.State)

		// Another caller's key with the same text is separate.
		other := rec
		other.CallerUID = 1001
		holder, err = s.ReserveIdempotencyKey(ctx(t), other, t0, stale)
		require.NoError(t, err)
		require.Nil(t, holder)

		require.NoError(t, s.CompleteIdempotencyKey(ctx(t), 1000, "k-1", "h1", 202, []byte(`{"ok":true}`), t0.Add(72*time.Hour)))
		holder, err = s.ReserveIdempotencyKey(ctx(t), rec, t0.Add(time.Minute), t0.Add(time.Minute-5*time.Minute))
		require.NoError(t, err)
		require.Equal(t, idempotency.StateDone, holder.State)
		require.Equal(t, 202, holder.ResponseStatus)
		require.Equal(t, `{"ok":true}`, string(holder.ResponseBody))
		require.Equal(t, "h1", holder.RequestHash)

		// Expired: treated as new.
		later := t0.Add(73 * time.Hour)
		rec2 := rec
		rec2.RequestHash = "h2"
		rec2.ExpiresAt = later.Add(72 * time.Hour)
		holder, err = s.ReserveIdempotencyKey(ctx(t), rec2, later, later.Add(-5*time.Minute))
		require.NoError(t, err)
		require.Nil(t, holder)

		// A stale in-flight record (its request died) may be taken over.
		holder, err = s.ReserveIdempotencyKey(ctx(t), rec2, later.Add(time.Minute), later.Add(-time.Minute))
		require.NoError(t, err)
		require.NotNil(t, holder, "fresh in-flight holds")
		holder, err = s.ReserveIdempotencyKey(ctx(t), rec2, later.Add(10*time.Minute), later.Add(5*time.Minute))
		require.NoError(t, err)
		require.Nil(t, holder, "stale in-flight is taken over")

		// Release forgets a reservation.
		require.NoError(t, s.ReleaseIdempotencyKey(ctx(t), 1001, "k-1", "h1"))
		holder, err = s.ReserveIdempotencyKey(ctx(t), other, t0.Add(time.Second), stale)
		require.NoError(t, err)
		require.Nil(t, holder)

		// Purge removes only expired keys.
		n, err := s.PurgeExpiredIdempotencyKeys(ctx(t), t0.Add(72*time.Hour+time.Second), 100)
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "uid 1001's key expired; uid 1000's was renewed")
		holder, err = s.ReserveIdempotencyKey(ctx(t), rec2, later.Add(11*time.Minute), later)
		require.NoError(t, err)
		require.NotNil(t, holder, "live key survived the purge")
	})
}

func TestArchiveAndPurge(t *testing.T) {
	contract(t, func(t *testing.T, s store.Store) {
		c := ctx(t)
		// Six messages: resolved old, dead old, resolved young, pending old, retrying old, dead old.
		for i := 0; i < 6; i++ {
			ingest(t, s, t0, incoming("a.dlq.v1", int64(i), `{}`))
		}
		msgs, _, _ := s.ListDLQ(c, dlq.ListFilter{Topic: "a.dlq.v1", Page: 1, PageSize: 10})
		byOff := map[int64]uuid.UUID{}
		for _, m := range msgs {
			byOff[m.Position.Offset] = m.ID
		}
		finish := func(off int64, o dlq.Outcome, at time.Time) {
			// Claimed a minute before it finishes, as in life: an UPDATE that
			// leaves updated_at as it was gets the trigger's clock time.
			claimAt := at.Add(-time.Minute)
			_, err := s.ClaimDLQ(c, byOff[off], dlq.Claim{Owner: "o", Now: claimAt, LeaseUntil: at.Add(time.Hour)})
			require.NoError(t, err)
			o.ID = byOff[off]
			require.NoError(t, s.FinishDLQ(c, "o", at, []dlq.Outcome{o}))
		}
		old := t0.Add(-31 * 24 * time.Hour)
		finish(0, dlq.Outcome{Acked: true}, old)
		for i := 0; i < 3; i++ {
			finish(1, dlq.Outcome{Counted: true}, old)
		}
		finish(2, dlq.Outcome{Acked: true}, t0.Add(-29*24*time.Hour))
		_, err := s.ClaimDLQ(c, byOff[4], dlq.Claim{Owner: "o", Now: old, LeaseUntil: t0.Add(time.Hour)})
		require.NoError(t, err)
		for i := 0; i < 3; i++ {
			finish(5, dlq.Outcome{Counted: true}, old)
		}

		cutoff := t0.Add(-30 * 24 * time.Hour)
		n, err := s.ArchiveDLQBatch(c, cutoff, 1)
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "batch size is respected")
		n, err = s.ArchiveDLQBatch(c, cutoff, 100)
		require.NoError(t, err)
		require.EqualValues(t, 2, n)
		n, err = s.ArchiveDLQBatch(c, cutoff, 100)
		require.NoError(t, err)
		require.Zero(t, n)

		left, total, err := s.ListDLQ(c, dlq.ListFilter{Topic: "a.dlq.v1", Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.EqualValues(t, 3, total)
		var offs []int64
		for _, m := range left {
			offs = append(offs, m.Position.Offset)
		}
		require.ElementsMatch(t, []int64{2, 3, 4}, offs, "young, PENDING and RETRYING stay")

		// Archived rows are purged after archive_retention.
		n, err = s.PurgeDLQArchiveBatch(c, old.Add(-time.Second), 100)
		require.NoError(t, err)
		require.Zero(t, n)
		n, err = s.PurgeDLQArchiveBatch(c, old.Add(time.Second), 100)
		require.NoError(t, err)
		require.EqualValues(t, 3, n)

		unlock, ok, err := s.TryRetentionLock(c)
		require.NoError(t, err)
		require.True(t, ok)
		_, ok2, err := s.TryRetentionLock(c)
		require.NoError(t, err)
		require.False(t, ok2, "one retention pass at a time")
		unlock()
		unlock2, ok, err := s.TryRetentionLock(c)
		require.NoError(t, err)
		require.True(t, ok)
		unlock2()
	})
}

func TestStoreErrorsAreSentinels(t *testing.T) {
	contract(t, func(t *testing.T, s store.Store) {
		_, err := s.GetDLQ(ctx(t), uuid.New())
		require.True(t, errors.Is(err, derrors.ErrNotFound))
		require.NoError(t, s.Ping(ctx(t)))
	})
}
