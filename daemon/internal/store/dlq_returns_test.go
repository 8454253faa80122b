package store_test

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
)

// digested is incoming with the digest of its payload, as intake gives
// every message (dlq.Digest).
func digested(topic string, offset int64, payload string) dlq.Incoming {
	in := incoming(topic, offset, payload)
	sum := sha256.Sum256([]byte(payload))
	in.Digest = sum[:]
	return in
}

// A DLQ topic deleted and created again starts its offsets at 0 again: a
// position stored before, with other content, is a new dead letter; with
// the same content it is a redelivery, live or archived. A row stored
// before digests (an empty one) matches any content.
func TestSamePositionWithOtherContentIsANewDeadLetter(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		res := ingest(t, s, t0, digested("a.dlq.v1", 0, `{"old":0}`), digested("a.dlq.v1", 1, `{"old":1}`))
		require.Equal(t, dlq.IngestResult{Inserted: 2}, res)
		res = ingest(t, s, t0, digested("a.dlq.v1", 0, `{"old":0}`), digested("a.dlq.v1", 1, `{"new":1}`))
		require.Equal(t, dlq.IngestResult{Inserted: 1, Duplicates: 1}, res, "the same content is a redelivery; other content is new")
		res = ingest(t, s, t0, digested("a.dlq.v1", 1, `{"new":1}`))
		require.Equal(t, dlq.IngestResult{Duplicates: 1}, res, "and the new one is stored once")
		_, total, err := s.ListDLQ(ctx, dlq.ListFilter{Topic: "a.dlq.v1", Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.EqualValues(t, 3, total)

		// Archived: the same content stays known, other content is new.
		msgs, _, err := s.ListDLQ(ctx, dlq.ListFilter{Topic: "a.dlq.v1", Page: 1, PageSize: 10})
		require.NoError(t, err)
		for _, m := range msgs {
			resolve(t, s, m.ID, t0)
		}
		n, err := s.ArchiveDLQBatch(ctx, t0.Add(time.Second), 100)
		require.NoError(t, err)
		require.EqualValues(t, 3, n)
		res = ingest(t, s, t0.Add(time.Hour), digested("a.dlq.v1", 0, `{"old":0}`), digested("a.dlq.v1", 1, `{"new":1}`),
			digested("a.dlq.v1", 0, `{"newer":0}`))
		require.Equal(t, dlq.IngestResult{Inserted: 1, Duplicates: 2}, res)
		require.Equal(t, []byte(`{"newer":0}`), onlyMessage(t, s, "a.dlq.v1").Payload)

		// A row from before digests matches any content at its position.
		ingest(t, s, t0, digested("b.dlq.v1", 5, `{"legacy":1}`))
		exec(t, s, `UPDATE dlq.dlq_messages SET content_digest = '\x' WHERE dlq_topic = 'b.dlq.v1'`,
			`UPDATE dlq_messages SET content_digest = x'' WHERE dlq_topic = 'b.dlq.v1'`)
		res = ingest(t, s, t0, digested("b.dlq.v1", 5, `{"anything":1}`))
		require.Equal(t, dlq.IngestResult{Duplicates: 1}, res)
	})
}

// ourReplay stores a message and resolves it (a republish the broker
// acknowledged); back is the replay coming back failed at offset.
func ourReplay(t *testing.T, s store.Store, topic string) (id uuid.UUID, back func(offset int64) dlq.Incoming) {
	t.Helper()
	ingest(t, s, t0, digested(topic, 0, `{"order":1}`))
	m := onlyMessage(t, s, topic)
	resolve(t, s, m.ID, t0)
	return m.ID, func(offset int64) dlq.Incoming {
		in := digested(topic, offset, `{"order":1}`)
		in.FeedbackOf, in.ErrorMessage = &m.ID, "failed again"
		return in
	}
}

// Every return applied is recorded by position and digest: reading the
// DLQ topic again never applies one twice, whatever happened to the record
// in between (resolved again, archived), and a return is never stored as a
// record of its own.
func TestReturnsAreRecordedAndNeverAppliedTwice(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		id, back := ourReplay(t, s, "a.dlq.v1")
		opts := dlq.IngestOptions{Now: t0.Add(time.Minute), MaxRetries: 3}
		for off := int64(1); off <= 2; off++ {
			res, err := s.IngestDLQ(ctx, []dlq.Incoming{back(off)}, opts)
			require.NoError(t, err)
			require.Equal(t, dlq.IngestResult{Feedback: 1}, res)
			resolve(t, s, id, t0.Add(time.Duration(off)*time.Hour))
		}
		before, err := s.GetDLQ(ctx, id)
		require.NoError(t, err)
		require.Equal(t, dlq.StatusResolved, before.Status)
		require.Equal(t, 2, before.RetryCount)

		// The whole topic read again: the original and both returns.
		res, err := s.IngestDLQ(ctx, []dlq.Incoming{digested("a.dlq.v1", 0, `{"order":1}`), back(1), back(2)}, opts)
		require.NoError(t, err)
		require.Equal(t, dlq.IngestResult{Duplicates: 3}, res)
		after, err := s.GetDLQ(ctx, id)
		require.NoError(t, err)
		require.Equal(t, before, after, "nothing applied twice")

		// Archived, and read again: still nothing new. (PostgreSQL's trigger
		// may have set updated_at to the wall clock's now.)
		n, err := s.ArchiveDLQBatch(ctx, time.Now().Add(time.Hour), 100)
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		res, err = s.IngestDLQ(ctx, []dlq.Incoming{digested("a.dlq.v1", 0, `{"order":1}`), back(1), back(2)}, opts)
		require.NoError(t, err)
		require.Equal(t, dlq.IngestResult{Duplicates: 3}, res)
		_, total, err := s.ListDLQ(ctx, dlq.ListFilter{Topic: "a.dlq.v1", Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.Zero(t, total, "no return became a record of its own")

		// Once the archived record is purged, its recorded returns go too.
		require.Equal(t, 2, count(t, s, `SELECT count(*) FROM dlq.dlq_returns`, `SELECT count(*) FROM dlq_returns`))
		_, err = s.PurgeDLQArchiveBatch(ctx, time.Now().Add(2*time.Hour), 100)
		require.NoError(t, err)
		require.Zero(t, count(t, s, `SELECT count(*) FROM dlq.dlq_returns`, `SELECT count(*) FROM dlq_returns`))
	})
}

// A dead letter on the same DLQ topic with a copied x-dlq-id but other
// value bytes is not a return: it is stored, and the record is unchanged.
func TestCopiedIDWithOtherBytesIsStored(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		id, back := ourReplay(t, s, "a.dlq.v1")
		before, err := s.GetDLQ(ctx, id)
		require.NoError(t, err)
		item := back(1)
		item.Payload, item.ErrorMessage = []byte(`{"item":2}`), "item 2 failed"
		res, err := s.IngestDLQ(ctx, []dlq.Incoming{item}, dlq.IngestOptions{Now: t0, MaxRetries: 3})
		require.NoError(t, err)
		require.Equal(t, dlq.IngestResult{Inserted: 1}, res)
		after, err := s.GetDLQ(ctx, id)
		require.NoError(t, err)
		require.Equal(t, before, after)
		// Read again, it is a redelivery of the record it became, even now
		// that the same position would... still not be a return.
		res, err = s.IngestDLQ(ctx, []dlq.Incoming{item}, dlq.IngestOptions{Now: t0, MaxRetries: 3})
		require.NoError(t, err)
		require.Equal(t, dlq.IngestResult{Duplicates: 1}, res)
	})
}

// A return that arrives while a republish of its record is in flight is
// counted under the claim: the lease stays, and the claim's outcome is
// recorded on the count as it is then.
func TestReturnDuringAClaimKeepsTheLease(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		id, back := ourReplay(t, s, "a.dlq.v1")
		opts := dlq.IngestOptions{Now: t0.Add(time.Hour), MaxRetries: 3}
		_, err := s.IngestDLQ(ctx, []dlq.Incoming{back(1)}, opts)
		require.NoError(t, err)
		claim := dlq.Claim{Owner: "d", Now: t0.Add(time.Hour), LeaseUntil: t0.Add(2 * time.Hour)}
		m := claimed(t, s, id, claim)
		// A second consumer group's failure on the first replay.
		res, err := s.IngestDLQ(ctx, []dlq.Incoming{back(2)}, opts)
		require.NoError(t, err)
		require.Equal(t, dlq.IngestResult{Feedback: 1}, res)
		cur, err := s.GetDLQ(ctx, id)
		require.NoError(t, err)
		require.Equal(t, dlq.State{Status: dlq.StatusRetrying, RetryCount: 2, MaxRetries: 3}, cur.State())
		_, err = s.ClaimDLQ(ctx, id, dlq.Claim{Owner: "e", Now: t0.Add(time.Hour), LeaseUntil: t0.Add(3 * time.Hour)})
		require.Error(t, err, "the lease is kept")

		acked := dlq.Finish(*m, dlq.EventAcked)
		acked.At, acked.Attempted = t0.Add(time.Hour), true
		got := finished(t, s, "d", t0.Add(time.Hour), []dlq.Outcome{acked})
		require.True(t, got[0].Applied, "the in-flight acknowledgement is recorded")
		require.Equal(t, dlq.State{Status: dlq.StatusResolved, RetryCount: 2, MaxRetries: 3}, got[0].Record.To)
		cur, err = s.GetDLQ(ctx, id)
		require.NoError(t, err)
		require.Equal(t, dlq.State{Status: dlq.StatusResolved, RetryCount: 2, MaxRetries: 3}, cur.State())
		var outcomes []string
		for _, a := range cur.Attempts {
			outcomes = append(outcomes, a.Outcome)
		}
		require.Equal(t, []string{dlq.OutcomeResolved, dlq.OutcomeReturned, dlq.OutcomeReturned, dlq.OutcomeResolved}, outcomes)
	})
}

// Returns during a claim can use up the attempts: the claim then ends DEAD
// whichever way it ends but acknowledged, and so does an expired lease,
// never PENDING with no attempts left (a state no retry takes).
func TestAClaimWhoseAttemptsReturnsUsedUpEndsDead(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		for _, how := range []string{"released", "lease expired"} {
			topic := map[string]string{"released": "r.dlq.v1", "lease expired": "e.dlq.v1"}[how]
			id, back := ourReplay(t, s, topic)
			opts := dlq.IngestOptions{Now: t0.Add(time.Hour), MaxRetries: 3}
			_, err := s.IngestDLQ(ctx, []dlq.Incoming{back(1)}, opts)
			require.NoError(t, err)
			m := claimed(t, s, id, dlq.Claim{Owner: "d", Now: t0.Add(time.Hour), LeaseUntil: t0.Add(2 * time.Hour)})
			for off := int64(2); off <= 3; off++ {
				_, err := s.IngestDLQ(ctx, []dlq.Incoming{back(off)}, opts)
				require.NoError(t, err)
			}
			cur, err := s.GetDLQ(ctx, id)
			require.NoError(t, err)
			require.Equal(t, dlq.State{Status: dlq.StatusRetrying, RetryCount: 3, MaxRetries: 3}, cur.State(), "still under its claim")
			if how == "released" {
				o := dlq.Finish(*m, dlq.EventReleased)
				o.Error, o.Attempted = "source down", true
				got := finished(t, s, "d", t0.Add(time.Hour), []dlq.Outcome{o})
				require.Equal(t, dlq.OutcomeDead, got[0].Record.Name)
			} else {
				n, err := s.ReleaseExpiredDLQLeases(ctx, t0.Add(3*time.Hour), dlq.Sending{})
				require.NoError(t, err)
				require.EqualValues(t, 1, n)
			}
			cur, err = s.GetDLQ(ctx, id)
			require.NoError(t, err)
			require.Equal(t, dlq.State{Status: dlq.StatusDead, RetryCount: 3, MaxRetries: 3}, cur.State(), how)
			require.Nil(t, cur.NextRetryAt, how)
		}
	})
}

// The release of expired leases in SQL is dlq.State.Next(EventReleased).
func TestReleaseOfExpiredLeasesIsTheStateMachines(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		var batch []dlq.Incoming
		for count := 0; count <= 4; count++ {
			batch = append(batch, incoming("l.dlq.v1", int64(count), `{}`))
		}
		ingest(t, s, t0, batch...)
		msgs, _, err := s.ListDLQ(ctx, dlq.ListFilter{Topic: "l.dlq.v1", Page: 1, PageSize: 10})
		require.NoError(t, err)
		for _, m := range msgs {
			exec(t, s, `UPDATE dlq.dlq_messages SET status = 'RETRYING', retry_count = $2, lease_owner = 'x', lease_expires_at = $3 WHERE id = $1`,
				`UPDATE dlq_messages SET status = 'RETRYING', retry_count = ?2, lease_owner = 'x', lease_expires_at = ?3 WHERE id = ?1`,
				m.ID.String(), int(m.Position.Offset()), sqlTime(s, t0))
		}
		n, err := s.ReleaseExpiredDLQLeases(ctx, t0.Add(time.Minute), dlq.Sending{})
		require.NoError(t, err)
		require.EqualValues(t, 5, n)
		for _, m := range msgs {
			want, ok := dlq.State{Status: dlq.StatusRetrying, RetryCount: int(m.Position.Offset()), MaxRetries: 3}.Next(dlq.EventReleased)
			require.True(t, ok)
			cur, err := s.GetDLQ(ctx, m.ID)
			require.NoError(t, err)
			require.Equal(t, want, cur.State(), "retry_count %d", m.Position.Offset())
			require.Equal(t, want.Status == dlq.StatusPending, cur.NextRetryAt != nil)
		}
	})
}

// A source that stays down for a long time leaves one history entry with a
// count, not fifty that push the real attempts out.
func TestUnavailableOutcomesAreFoldedInTheHistory(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		m := stored(t, s, "u.dlq.v1")
		attempt := func(e dlq.Event, err string, at time.Time) {
			c := claimed(t, s, m.ID, dlq.Claim{Owner: "d", Now: at, LeaseUntil: at.Add(time.Minute)})
			o := dlq.Finish(*c, e)
			o.Error, o.At, o.Trigger, o.Attempted = err, at, dlq.TriggerAuto, true
			require.True(t, finished(t, s, "d", at, []dlq.Outcome{o})[0].Applied)
		}
		attempt(dlq.EventRefused, "topic refused", t0)
		for i := 1; i <= 120; i++ {
			attempt(dlq.EventReleased, "source kafka is not running", t0.Add(time.Duration(i)*time.Minute))
		}
		cur, err := s.GetDLQ(ctx, m.ID)
		require.NoError(t, err)
		require.Len(t, cur.Attempts, 2)
		require.Equal(t, dlq.OutcomeFailed, cur.Attempts[0].Outcome, "the real attempt is still there")
		require.Equal(t, 120, cur.Attempts[1].Count)
		require.True(t, t0.Add(120*time.Minute).Equal(*cur.Attempts[1].LastAt))
		require.True(t, t0.Add(time.Minute).Equal(cur.Attempts[1].At))
		require.Equal(t, 1, cur.RetryCount, "nothing counted for the source being down")
	})
}

// A message with no original topic is listed and deletable, never claimed
// nor revived.
func TestNoOriginalTopicIsNeverClaimed(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		in := incoming("sink-dlq", 0, `{}`)
		in.OriginalTopic, in.LastError = "", "no original topic: nothing names one"
		_, err := s.IngestDLQ(ctx, []dlq.Incoming{in}, dlq.IngestOptions{Now: t0, MaxRetries: 3, FirstRetryAt: at(t0)})
		require.NoError(t, err)
		m := onlyMessage(t, s, "sink-dlq")
		require.Equal(t, "", m.OriginalTopic)
		require.Equal(t, "no original topic: nothing names one", m.LastError)

		c := dlq.Claim{Owner: "d", Now: t0.Add(time.Hour), LeaseUntil: t0.Add(2 * time.Hour), Sources: []string{"kafka"}}
		_, err = s.ClaimDLQ(ctx, m.ID, c)
		var nre *dlq.NotRetryableError
		require.ErrorAs(t, err, &nre)
		require.Contains(t, nre.Reason, "no original topic")
		due, err := s.ClaimDueDLQ(ctx, 10, c)
		require.NoError(t, err)
		require.Empty(t, due)
		page, err := s.ClaimDLQTopic(ctx, "sink-dlq", nil, 10, c)
		require.NoError(t, err)
		require.Empty(t, page)
		n, err := s.CountRetryableDLQTopic(ctx, "sink-dlq")
		require.NoError(t, err)
		require.Zero(t, n)

		exec(t, s, `UPDATE dlq.dlq_messages SET status = 'DEAD'`, `UPDATE dlq_messages SET status = 'DEAD'`)
		_, err = s.ReviveDLQ(ctx, m.ID, dlq.Revive{Now: t0, From: dlq.StatusDead, To: dlq.State{Status: dlq.StatusPending, MaxRetries: 3}})
		var nrev *dlq.NotRevivableError
		require.ErrorAs(t, err, &nrev)
		require.Contains(t, nrev.Reason, "no original topic")
		require.NoError(t, s.DeleteDLQ(ctx, m.ID))
	})
}

// Issue 27 case 3: a consumer that fails a replay may write its return
// twice (a transaction aborted and redone by a client that reads
// uncommitted, or an at-least-once retry of the produce): two records at
// two offsets, both with the attempt's x-dlq-retry-count. The attempt
// failed once, so it is counted once; the next attempt's return counts
// again, and a late copy of an earlier one does not.
func TestAReturnIsCountedOncePerAttempt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		id, back := ourReplay(t, s, "r.dlq.v1")
		ingest(t, s, t0, digested("bystander.dlq.v1", 0, `{"b":1}`))
		bystander := onlyMessage(t, s, "bystander.dlq.v1")
		returnOf := func(offset int64, attempt int) dlq.Incoming {
			in := back(offset)
			in.FeedbackAttempt = attempt
			return in
		}
		state := func() (int, []string) {
			m, err := s.GetDLQ(ctx, id)
			require.NoError(t, err)
			var outcomes []string
			for _, a := range m.Attempts {
				outcomes = append(outcomes, a.Outcome)
			}
			return m.RetryCount, outcomes
		}

		res := ingest(t, s, t0.Add(time.Minute), returnOf(1, 1))
		require.Equal(t, dlq.IngestResult{Feedback: 1}, res)
		res = ingest(t, s, t0.Add(2*time.Minute), returnOf(2, 1))
		require.Equal(t, dlq.IngestResult{Duplicates: 1}, res, "the same attempt's second return is the same failure")
		n, outcomes := state()
		require.Equal(t, 1, n, "one failed attempt")
		require.Equal(t, []string{dlq.OutcomeResolved, dlq.OutcomeReturned}, outcomes)

		resolve(t, s, id, t0.Add(3*time.Minute)) // attempt 2, acknowledged
		res = ingest(t, s, t0.Add(4*time.Minute), returnOf(3, 2), returnOf(4, 1), returnOf(5, 2))
		require.Equal(t, dlq.IngestResult{Feedback: 1, Duplicates: 2}, res, "attempt 2's return counts once; a late copy of attempt 1's does not")
		n, outcomes = state()
		require.Equal(t, 2, n)
		require.Equal(t, []string{dlq.OutcomeResolved, dlq.OutcomeReturned, dlq.OutcomeResolved, dlq.OutcomeReturned}, outcomes)

		// Reading the topic again changes nothing.
		res = ingest(t, s, t0.Add(5*time.Minute), returnOf(1, 1), returnOf(2, 1), returnOf(3, 2), returnOf(4, 1), returnOf(5, 2))
		require.Equal(t, dlq.IngestResult{Duplicates: 5}, res)
		n2, outcomes2 := state()
		require.Equal(t, n, n2)
		require.Equal(t, outcomes, outcomes2)

		// A return without the header (a client that drops headers) is
		// counted as it always was: nothing tells its attempt.
		resolve(t, s, id, t0.Add(6*time.Minute))
		res = ingest(t, s, t0.Add(7*time.Minute), returnOf(6, 0))
		require.Equal(t, dlq.IngestResult{Feedback: 1, Dead: 1}, res, "the third failed attempt of three")

		after, err := s.GetDLQ(ctx, bystander.ID)
		require.NoError(t, err)
		require.Equal(t, bystander, *after, "another dead letter does not change")
	})
}
