package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
)

func TestClaimFinishStateMachine(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		m := stored(t, s, "a.dlq.v1")
		claim := dlq.Claim{Owner: "daemon-1", Now: t0, LeaseUntil: t0.Add(time.Minute)}

		got := claimed(t, s, m.ID, claim)
		require.Equal(t, dlq.StatusRetrying, got.Status)
		require.NotNil(t, got.LastRetryAt)

		// A second claim while the lease is held is a conflict.
		_, err := s.ClaimDLQ(ctx, m.ID, dlq.Claim{Owner: "daemon-2", Now: t0.Add(time.Second), LeaseUntil: t0.Add(time.Hour)})
		var nre *dlq.NotRetryableError
		require.ErrorAs(t, err, &nre)
		require.Contains(t, nre.Reason, "being retried")

		// Only the lease owner can finish it.
		finished(t, s, "daemon-2", t0, ended(got, dlq.EventAcked))
		cur, _ := s.GetDLQ(ctx, m.ID)
		require.Equal(t, dlq.StatusRetrying, cur.Status)

		// A failed attempt counts and goes back to PENDING with its next retry.
		next := t0.Add(2 * time.Minute)
		refused := dlq.Finish(*got, dlq.EventRefused)
		refused.NextRetryAt = func(int) *time.Time { return &next }
		finished(t, s, "daemon-1", t0, []dlq.Outcome{refused})
		cur, _ = s.GetDLQ(ctx, m.ID)
		require.Equal(t, dlq.StatusPending, cur.Status)
		require.Equal(t, 1, cur.RetryCount)
		require.True(t, cur.NextRetryAt.Equal(next))

		// Source unavailable: back to PENDING, not counted.
		got = claimed(t, s, m.ID, claim)
		finished(t, s, "daemon-1", t0, ended(got, dlq.EventReleased))
		cur, _ = s.GetDLQ(ctx, m.ID)
		require.Equal(t, dlq.StatusPending, cur.Status)
		require.Equal(t, 1, cur.RetryCount)

		// Two more counted failures reach max_retries: DEAD.
		for i := 0; i < 2; i++ {
			got = claimed(t, s, m.ID, claim)
			finished(t, s, "daemon-1", t0, ended(got, dlq.EventRefused))
		}
		cur, _ = s.GetDLQ(ctx, m.ID)
		require.Equal(t, dlq.StatusDead, cur.Status)
		require.Equal(t, 3, cur.RetryCount)
		_, err = s.ClaimDLQ(ctx, m.ID, claim)
		require.ErrorAs(t, err, &nre)
		require.Equal(t, "message is not retryable: status=DEAD, retry_count=3/3", nre.Reason)
	})
}

func TestClaimAckResolves(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		m := stored(t, s, "a.dlq.v1")
		claim := dlq.Claim{Owner: "d", Now: t0, LeaseUntil: t0.Add(time.Minute)}
		finished(t, s, "d", t0, ended(claimed(t, s, m.ID, claim), dlq.EventAcked))
		cur, _ := s.GetDLQ(ctx, m.ID)
		require.Equal(t, dlq.StatusResolved, cur.Status)
		_, err := s.ClaimDLQ(ctx, m.ID, claim)
		var nre *dlq.NotRetryableError
		require.ErrorAs(t, err, &nre)
		require.Equal(t, "message is not retryable: status=RESOLVED, retry_count=0/3", nre.Reason)
	})
}

func TestConcurrentClaimsHaveOneWinner(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		m := stored(t, s, "a.dlq.v1")
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for i := 0; i < 10; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				_, err := s.ClaimDLQ(ctx, m.ID, dlq.Claim{Owner: fmt.Sprint(i), Now: t0, LeaseUntil: t0.Add(time.Minute)})
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
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
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
				page, err := s.ClaimDLQTopic(ctx, "a.dlq.v1", cursor, 20, dlq.Claim{Owner: "d", Now: t0, LeaseUntil: t0.Add(time.Hour)})
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
						outs[i] = dlq.Finish(m, dlq.EventAcked)
						if i%3 == 0 {
							outs[i] = dlq.Finish(m, dlq.EventRefused)
						}
					}
					if _, err := s.FinishDLQ(ctx, "d", t0.Add(time.Second), outs); err != nil {
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
		_, resolved, err := s.ListDLQ(ctx, dlq.ListFilter{Topic: "a.dlq.v1", Status: dlq.StatusResolved, Page: 1, PageSize: 1})
		require.NoError(t, err)
		_, retrying, err := s.ListDLQ(ctx, dlq.ListFilter{Topic: "a.dlq.v1", Status: dlq.StatusRetrying, Page: 1, PageSize: 1})
		require.NoError(t, err)
		_, pending, err := s.ListDLQ(ctx, dlq.ListFilter{Topic: "a.dlq.v1", Status: dlq.StatusPending, Page: 1, PageSize: 1})
		require.NoError(t, err)
		require.Zero(t, retrying, "every claimed message has its outcome")
		require.EqualValues(t, n, resolved+pending, "none lost")
		require.Greater(t, pending, int64(0), "refused ones are PENDING again, with the claimer walking on past them")
	})
}

func TestExpiredLeasesReleased(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		ingest(t, s, t0, incoming("a.dlq.v1", 1, `{}`), incoming("a.dlq.v1", 2, `{}`))
		msgs, _, _ := s.ListDLQ(ctx, dlq.ListFilter{Topic: "a.dlq.v1", Page: 1, PageSize: 10})
		lost, err := s.ClaimDLQ(ctx, msgs[0].ID, dlq.Claim{Owner: "dead-daemon", Now: t0, LeaseUntil: t0.Add(time.Minute)})
		require.NoError(t, err)
		_, err = s.ClaimDLQ(ctx, msgs[1].ID, dlq.Claim{Owner: "live", Now: t0, LeaseUntil: t0.Add(time.Hour)})
		require.NoError(t, err)

		n, err := s.ReleaseExpiredDLQLeases(ctx, t0.Add(30*time.Second), dlq.Sending{})
		require.NoError(t, err)
		require.Zero(t, n)
		n, err = s.ReleaseExpiredDLQLeases(ctx, t0.Add(2*time.Minute), dlq.Sending{})
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		cur, _ := s.GetDLQ(ctx, msgs[0].ID)
		require.Equal(t, dlq.StatusPending, cur.Status)
		require.Equal(t, 0, cur.RetryCount, "a daemon's death is not the message's failure")
		cur, _ = s.GetDLQ(ctx, msgs[1].ID)
		require.Equal(t, dlq.StatusRetrying, cur.Status)
		// The dead daemon's late finish changes nothing.
		finished(t, s, "dead-daemon", t0, ended(lost, dlq.EventAcked))
		cur, _ = s.GetDLQ(ctx, msgs[0].ID)
		require.Equal(t, dlq.StatusPending, cur.Status)
	})
}

func TestClaimTopicWalksInOrderAndSkips(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		for i := 0; i < 7; i++ {
			ingest(t, s, t0.Add(time.Duration(i)*time.Second), incoming("a.dlq.v1", int64(i), `{}`))
		}
		all, _, _ := s.ListDLQ(ctx, dlq.ListFilter{Topic: "a.dlq.v1", Page: 1, PageSize: 10})
		// Make offset 3 RESOLVED: not retryable, skipped.
		var third uuid.UUID
		for _, m := range all {
			if m.Position.Offset == 3 {
				third = m.ID
			}
		}
		claimed, err := s.ClaimDLQ(ctx, third, dlq.Claim{Owner: "x", Now: t0, LeaseUntil: t0.Add(time.Minute)})
		require.NoError(t, err)
		finished(t, s, "x", t0, ended(claimed, dlq.EventAcked))

		claim := dlq.Claim{Owner: "all", Now: t0, LeaseUntil: t0.Add(time.Minute)}
		var got []int64
		var cursor *dlq.Cursor
		for {
			page, err := s.ClaimDLQTopic(ctx, "a.dlq.v1", cursor, 4, claim)
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
				outs = append(outs, dlq.Finish(m, dlq.EventRefused))
			}
			finished(t, s, "all", t0, outs)
		}
		require.Equal(t, []int64{0, 1, 2, 4, 5, 6}, got)
		// By original topic too.
		page, err := s.ClaimDLQTopic(ctx, "orders.events.v1", nil, 100, claim)
		require.NoError(t, err)
		require.Len(t, page, 6)
	})
}

func TestClaimDueOnlyTakesDueMessages(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		due, later := t0.Add(time.Minute), t0.Add(time.Hour)
		_, err := s.IngestDLQ(ctx, []dlq.Incoming{incoming("a.dlq.v1", 1, `{}`)}, dlq.IngestOptions{Now: t0, MaxRetries: 3, FirstRetryAt: at(due)})
		require.NoError(t, err)
		_, err = s.IngestDLQ(ctx, []dlq.Incoming{incoming("a.dlq.v1", 2, `{}`)}, dlq.IngestOptions{Now: t0, MaxRetries: 3, FirstRetryAt: at(later)})
		require.NoError(t, err)
		_, err = s.IngestDLQ(ctx, []dlq.Incoming{incoming("a.dlq.v1", 3, `{}`)}, dlq.IngestOptions{Now: t0, MaxRetries: 3})
		require.NoError(t, err)

		// A due message of a source that is not configured any more.
		renamed := incoming("a.dlq.v1", 4, `{}`)
		renamed.Position.Source = "kafka-old"
		_, err = s.IngestDLQ(ctx, []dlq.Incoming{renamed}, dlq.IngestOptions{Now: t0, MaxRetries: 3, FirstRetryAt: at(due)})
		require.NoError(t, err)

		claim := dlq.Claim{Owner: "loop", Now: t0.Add(2 * time.Minute), LeaseUntil: t0.Add(3 * time.Minute), Sources: []string{"kafka", "other"}}
		got, err := s.ClaimDueDLQ(ctx, 10, claim)
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.EqualValues(t, 1, got[0].Position.Offset)
		got, err = s.ClaimDueDLQ(ctx, 10, claim)
		require.NoError(t, err)
		require.Empty(t, got, "a claimed message is not claimed twice")
		claim.Sources = nil
		got, err = s.ClaimDueDLQ(ctx, 10, claim)
		require.NoError(t, err)
		require.Empty(t, got, "no source configured, nothing claimed")

		// The source that is not configured has one message waiting.
		pending, err := s.PendingBySourceDLQ(ctx, []string{"kafka"})
		require.NoError(t, err)
		require.Equal(t, []dlq.SourcePending{{Source: "kafka-old", Topic: "a.dlq.v1", Pending: 1}}, pending)
		pending, err = s.PendingBySourceDLQ(ctx, nil)
		require.NoError(t, err)
		require.ElementsMatch(t, []dlq.SourcePending{{Source: "kafka-old", Topic: "a.dlq.v1", Pending: 1},
			{Source: "kafka", Topic: "a.dlq.v1", Pending: 2}}, pending, "the claimed one is RETRYING")
	})
}

// The stores' retryable predicate is dlq.State.Retryable: over every
// status and count, ClaimDLQ takes exactly the retryable messages (a
// RETRYING one once its lease ran out), and the retry-all dry run counts
// exactly the retryable PENDING ones.
func TestRetryablePredicateIsTheStateMachines(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		type row struct {
			id    uuid.UUID
			state dlq.State
		}
		var batch []dlq.Incoming
		for i := 0; i < len(dlq.Statuses)*5*2; i++ {
			batch = append(batch, incoming("p.dlq.v1", int64(i), `{}`))
		}
		ingest(t, s, t0, batch...)
		msgs, _, err := s.ListDLQ(ctx, dlq.ListFilter{Topic: "p.dlq.v1", Page: 1, PageSize: 100})
		require.NoError(t, err)
		byOffset := map[int64]uuid.UUID{}
		for _, m := range msgs {
			byOffset[m.Position.Offset] = m.ID
		}
		var rows []row
		for i, status := range dlq.Statuses {
			for count := 0; count <= 4; count++ {
				for j, original := range []string{"orders.events.v1", ""} {
					id := byOffset[int64((i*5+count)*2+j)]
					exec(t, s, `UPDATE dlq.dlq_messages SET status = $2, retry_count = $3, lease_expires_at = $4, original_topic = $5 WHERE id = $1`,
						`UPDATE dlq_messages SET status = ?2, retry_count = ?3, lease_expires_at = ?4, original_topic = ?5 WHERE id = ?1`,
						id.String(), string(status), count, sqlTime(s, t0.Add(-time.Hour)), original)
					rows = append(rows, row{id, dlq.State{Status: status, RetryCount: count, MaxRetries: 3, NoOriginalTopic: original == ""}})
				}
			}
		}
		wantCount := 0
		for _, r := range rows {
			if r.state.Status == dlq.StatusPending && r.state.Retryable() {
				wantCount++
			}
		}
		n, err := s.CountRetryableDLQTopic(ctx, "p.dlq.v1")
		require.NoError(t, err)
		require.EqualValues(t, wantCount, n)
		for _, r := range rows {
			_, err := s.ClaimDLQ(ctx, r.id, dlq.Claim{Owner: "d", Now: t0, LeaseUntil: t0.Add(time.Minute)})
			if r.state.Retryable() {
				require.NoError(t, err, "%+v", r.state)
			} else {
				var nre *dlq.NotRetryableError
				require.ErrorAs(t, err, &nre, "%+v", r.state)
			}
		}
	})
}

// An outcome is written only to the row as it was claimed. A daemon whose
// lease ran out, and that claimed the message again after another attempt
// was counted, must not count its first attempt on top.
func TestALateOutcomeChangesNothing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		m := stored(t, s, "a.dlq.v1")
		claim := func(at time.Time) *dlq.Message {
			t.Helper()
			got, err := s.ClaimDLQ(ctx, m.ID, dlq.Claim{Owner: "d", Now: at, LeaseUntil: at.Add(time.Minute)})
			require.NoError(t, err)
			return got
		}
		first := claim(t0)
		n, err := s.ReleaseExpiredDLQLeases(ctx, t0.Add(2*time.Minute), dlq.Sending{})
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "the first lease ran out")
		second := claim(t0.Add(3 * time.Minute))
		finished(t, s, "d", t0.Add(3*time.Minute), ended(second, dlq.EventRefused))
		third := claim(t0.Add(4 * time.Minute))
		require.Equal(t, 1, third.RetryCount)

		finished(t, s, "d", t0.Add(5*time.Minute), ended(first, dlq.EventRefused))
		cur, err := s.GetDLQ(ctx, m.ID)
		require.NoError(t, err)
		require.Equal(t, dlq.StatusRetrying, cur.Status, "the late outcome did not end the third claim")
		require.Equal(t, 1, cur.RetryCount, "nor counted its attempt again")

		finished(t, s, "d", t0.Add(5*time.Minute), ended(third, dlq.EventRefused))
		cur, err = s.GetDLQ(ctx, m.ID)
		require.NoError(t, err)
		require.Equal(t, dlq.State{Status: dlq.StatusPending, RetryCount: 2, MaxRetries: 3}, cur.State())
	})
}

// holdConnections takes every connection of the store's pool until the
// returned release: a claim then waits, as it does behind a busy intake.
func holdConnections(t *testing.T, s store.Store) (release func()) {
	t.Helper()
	switch x := s.(type) {
	case *store.SQLite:
		conn, err := x.DB().Conn(ctx(t))
		require.NoError(t, err)
		return func() { conn.Close() }
	case *store.Postgres:
		var held []*pgxpool.Conn
		for range x.Pool().Config().MaxConns {
			c, err := x.Pool().Acquire(ctx(t))
			require.NoError(t, err)
			held = append(held, c)
		}
		return func() {
			for _, c := range held {
				c.Release()
			}
		}
	}
	t.Fatalf("unknown store %T", s)
	return nil
}

// Issue 27 case 5: the lease end was computed before the claim waited for
// a connection (SQLite has one), so a claim that waited longer than the
// lease wrote a lease that had already run out: the release of expired
// leases handed the message back while it was being sent, another claim
// took it, and it went out twice. A lease starts when it is written, for
// each kind of claim and for a renewal.
func TestALeaseStartsWhenTheClaimIsWritten(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		const lease = time.Second
		now := time.Now().UTC()
		ingestAt := func(topic string) dlq.Message {
			t.Helper()
			_, err := s.IngestDLQ(ctx, []dlq.Incoming{incoming(topic, 0, `{}`)}, dlq.IngestOptions{Now: now.Add(-time.Hour), MaxRetries: 3, FirstRetryAt: at(now.Add(-time.Hour))})
			require.NoError(t, err)
			return onlyMessage(t, s, topic)
		}
		one, due, page := ingestAt("one.dlq.v1"), ingestAt("due.dlq.v1"), ingestAt("page.dlq.v1")
		claims := map[string]func(c dlq.Claim) error{
			"ClaimDLQ": func(c dlq.Claim) error { _, err := s.ClaimDLQ(ctx, one.ID, c); return err },
			"ClaimDueDLQ": func(c dlq.Claim) error {
				c.Sources = []string{"kafka"}
				c.SkipTopics = []string{"one.dlq.v1", "page.dlq.v1"}
				got, err := s.ClaimDueDLQ(ctx, 10, c)
				if err == nil && len(got) != 1 {
					err = fmt.Errorf("claimed %d", len(got))
				}
				return err
			},
			"ClaimDLQTopic": func(c dlq.Claim) error {
				got, err := s.ClaimDLQTopic(ctx, "page.dlq.v1", nil, 10, c)
				if err == nil && len(got) != 1 {
					err = fmt.Errorf("claimed %d", len(got))
				}
				return err
			},
		}
		for _, name := range []string{"ClaimDLQ", "ClaimDueDLQ", "ClaimDLQTopic"} {
			release := holdConnections(t, s)
			start := time.Now().UTC()
			c := dlq.Claim{Owner: "d", Now: start, LeaseUntil: start.Add(lease)}
			done := make(chan error, 1)
			go func() { done <- claims[name](c) }()
			time.Sleep(2 * lease) // longer than the lease
			release()
			require.NoError(t, <-done, name)
			n, err := s.ReleaseExpiredDLQLeases(ctx, time.Now().UTC(), dlq.Sending{})
			require.NoError(t, err)
			require.Zero(t, n, "%s: a lease written after a wait longer than itself has not run out", name)

			// A renewal that waited as long is not already over either.
			release = holdConnections(t, s)
			renewAt := time.Now().UTC()
			renew := c
			renew.LeaseUntil = renewAt.Add(lease)
			ids := []uuid.UUID{one.ID, due.ID, page.ID}
			go func() { _, err := s.RenewDLQClaims(ctx, ids, renew); done <- err }()
			time.Sleep(2 * lease)
			release()
			require.NoError(t, <-done)
			n, err = s.ReleaseExpiredDLQLeases(ctx, time.Now().UTC(), dlq.Sending{})
			require.NoError(t, err)
			require.Zero(t, n, "%s: a renewal written after a long wait", name)
			// Hand the message back, so that the next claim's check sees
			// only its own.
			_, err = s.ReleaseExpiredDLQLeases(ctx, time.Now().Add(time.Hour), dlq.Sending{})
			require.NoError(t, err)
		}
	})
}

// A daemon's own claim that it is still sending is not over when its lease
// ran out (its renewals waited behind other statements): neither the
// release of expired leases nor another claim of the same daemon takes it
// over, so it is not sent twice. Another daemon's expired lease, and this
// daemon's for a message it is no longer sending, are taken over as before.
func TestADaemonNeverTakesOverItsOwnSendStillUnderWay(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		a, b := stored(t, s, "a.dlq.v1"), stored(t, s, "b.dlq.v1")
		mine := dlq.Claim{Owner: "me", Now: t0, LeaseUntil: t0.Add(time.Minute)}
		claimed(t, s, a.ID, mine)
		claimed(t, s, b.ID, mine)
		late := t0.Add(time.Hour) // both leases ran out

		_, err := s.ClaimDLQ(ctx, a.ID, dlq.Claim{Owner: "me", Now: late, LeaseUntil: late.Add(time.Minute)})
		require.Error(t, err, "this daemon does not take over its own claim")
		n, err := s.ReleaseExpiredDLQLeases(ctx, late, dlq.Sending{Owner: "me", IDs: []uuid.UUID{a.ID}})
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "only b, which it is no longer sending")
		got, err := s.GetDLQ(ctx, a.ID)
		require.NoError(t, err)
		require.Equal(t, dlq.StatusRetrying, got.Status, "a is still being sent")
		got, err = s.GetDLQ(ctx, b.ID)
		require.NoError(t, err)
		require.Equal(t, dlq.StatusPending, got.Status)

		// Another daemon's expired lease is taken over, as leases are for.
		m, err := s.ClaimDLQ(ctx, a.ID, dlq.Claim{Owner: "other", Now: late, LeaseUntil: late.Add(time.Minute)})
		require.NoError(t, err)
		require.Equal(t, dlq.StatusRetrying, m.Status)
	})
}
