package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
)

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
