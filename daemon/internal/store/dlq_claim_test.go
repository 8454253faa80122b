package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
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
			if m.Position.Offset() == 3 {
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
				got = append(got, m.Position.Offset())
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
		require.EqualValues(t, 1, got[0].Position.Offset())
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
			byOffset[m.Position.Offset()] = m.ID
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
