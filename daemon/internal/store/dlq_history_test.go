package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
)

// rowsDigest fingerprints every stored dead letter but except, column by
// column as the store keeps them (live and archived), so that a test can
// check that an operation on one message left every other exactly as it was.
func rowsDigest(t *testing.T, s store.Store, except uuid.UUID) string {
	t.Helper()
	var out string
	var err error
	switch x := s.(type) {
	case *store.Postgres:
		err = x.Pool().QueryRow(ctx(t), `SELECT COALESCE(md5(string_agg(r, '|' ORDER BY r)), '') FROM (
			SELECT m::text AS r FROM dlq.dlq_messages m WHERE id <> $1
			UNION ALL SELECT a::text FROM dlq.dlq_messages_archive a WHERE id <> $1) t`, except).Scan(&out)
	case *store.SQLite:
		err = x.DB().QueryRowContext(ctx(t), `SELECT COALESCE(group_concat(r, '|'), '') FROM (SELECT
			id || quote(original_topic) || quote(error_message) || retry_count || max_retries || quote(payload) || status ||
			created_at || updated_at || quote(last_retry_at) || quote(message_key) || quote(headers) || quote(raw_payload) ||
			quote(next_retry_at) || quote(lease_owner) || quote(last_error) || attempt_log || quote(republished_at) AS r
			FROM (SELECT * FROM dlq_messages UNION ALL SELECT * FROM dlq_messages_archive) WHERE id <> ?1 ORDER BY r)`,
			except.String()).Scan(&out)
	}
	require.NoError(t, err)
	return out
}

func kinds(events []dlq.HistoryEvent) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.Kind
	}
	return out
}

func detailOf(t *testing.T, e dlq.HistoryEvent) map[string]any {
	t.Helper()
	var d map[string]any
	require.NoError(t, json.Unmarshal(e.Detail, &d), string(e.Detail))
	return d
}

// Every state change of a message is in its history, in order, written by
// the store in the change's own transaction: intake (from the row),
// attempts with their outcome and the operator's uid, a returning replay,
// a revive, an operator's replay and deletion. Other messages do not change.
func TestHistoryRecordsEveryChange(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		ingest(t, s, t0, digested("a.dlq.v1", 7, `{"n":1}`), digested("b.dlq.v1", 1, `{"other":true}`))
		m := onlyMessage(t, s, "a.dlq.v1")
		other := onlyMessage(t, s, "b.dlq.v1")
		before := rowsDigest(t, s, m.ID)

		// A manual attempt refused by the broker, with the operator's uid.
		uid := uint32(1001)
		c := claimed(t, s, m.ID, dlq.Claim{Owner: "d", Now: t0.Add(time.Minute), LeaseUntil: t0.Add(2 * time.Minute)})
		o := dlq.Finish(*c, dlq.EventRefused)
		o.At, o.Trigger, o.Attempted, o.UID, o.Error = t0.Add(time.Minute), dlq.TriggerManual, true, &uid, "record too large"
		require.True(t, finished(t, s, "d", t0.Add(time.Minute), []dlq.Outcome{o})[0].Applied)
		// Acknowledged, then the replay comes back.
		resolve(t, s, m.ID, t0.Add(2*time.Minute))
		back := digested("a.dlq.v1", 8, `{"n":1}`)
		back.FeedbackOf = &m.ID
		require.Equal(t, 1, ingest(t, s, t0.Add(3*time.Minute), back).Feedback)
		// An operator's replay.
		require.NoError(t, s.RecordDLQEvent(ctx, m.ID, dlq.HistoryEvent{At: t0.Add(4 * time.Minute), Kind: dlq.KindReplayed,
			Detail: []byte(`{"replay_id":"r1","topic":"a.events.v1"}`), UID: &uid}))

		h, err := s.DLQHistory(ctx, m.ID)
		require.NoError(t, err)
		require.Equal(t, []string{dlq.KindIntake, dlq.KindAttempt, dlq.KindAttempt, dlq.KindReturned, dlq.KindReplayed}, kinds(h))
		in := detailOf(t, h[0])
		require.Equal(t, map[string]any{"source": "kafka", "topic": "a.dlq.v1", "position": "p0@7",
			"original_topic": "orders.events.v1", "error": "processing failed"}, in)
		require.True(t, h[0].At.Equal(t0))
		failed := detailOf(t, h[1])
		require.Equal(t, dlq.OutcomeFailed, failed["outcome"])
		require.Equal(t, "record too large", failed["error"])
		require.Equal(t, "manual", failed["trigger"])
		require.Equal(t, &uid, h[1].UID)
		require.True(t, h[1].At.Equal(t0.Add(time.Minute)), h[1].At)
		require.Equal(t, dlq.OutcomeResolved, detailOf(t, h[2])["outcome"])
		require.Nil(t, h[2].UID)
		require.Contains(t, detailOf(t, h[3])["error"], "came back to a.dlq.v1")
		require.Equal(t, "r1", detailOf(t, h[4])["replay_id"])
		require.Equal(t, &uid, h[4].UID)

		// The other message's history is its intake alone, and it did not change.
		oh, err := s.DLQHistory(ctx, other.ID)
		require.NoError(t, err)
		require.Equal(t, []string{dlq.KindIntake}, kinds(oh))
		require.Equal(t, before, rowsDigest(t, s, m.ID))

		// Deleted: the deletion is the last event, and the history stays.
		require.NoError(t, s.DeleteDLQAs(ctx, m.ID, dlq.HistoryEvent{At: t0.Add(5 * time.Minute), Kind: dlq.KindDeleted, UID: &uid}))
		_, err = s.GetDLQ(ctx, m.ID)
		require.ErrorIs(t, err, derrors.ErrNotFound)
		h, err = s.DLQHistory(ctx, m.ID)
		require.NoError(t, err)
		require.Equal(t, []string{dlq.KindIntake, dlq.KindAttempt, dlq.KindAttempt, dlq.KindReturned, dlq.KindReplayed, dlq.KindDeleted}, kinds(h))
		require.Equal(t, in, detailOf(t, h[0]), "the intake is kept with the deletion")
		require.True(t, h[0].At.Equal(t0))
		require.Equal(t, before, rowsDigest(t, s, m.ID))
	})
}

// Failure paths change nothing: an unknown id is not found everywhere,
// and no event is written for it.
func TestHistoryOfUnknownMessages(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		m := stored(t, s, "a.dlq.v1")
		before := rowsDigest(t, s, uuid.Nil)
		id := uuid.New()
		_, err := s.DLQHistory(ctx, id)
		require.ErrorIs(t, err, derrors.ErrNotFound)
		require.ErrorIs(t, s.RecordDLQEvent(ctx, id, dlq.HistoryEvent{At: t0, Kind: dlq.KindReplayed}), derrors.ErrNotFound)
		require.ErrorIs(t, s.DeleteDLQAs(ctx, id, dlq.HistoryEvent{At: t0, Kind: dlq.KindDeleted}), derrors.ErrNotFound)
		_, err = s.DLQHistory(ctx, id)
		require.ErrorIs(t, err, derrors.ErrNotFound, "no event was written for it")
		require.Equal(t, 0, count(t, s, `SELECT count(*) FROM dlq.dlq_events`, `SELECT count(*) FROM dlq_events`))
		require.Equal(t, before, rowsDigest(t, s, uuid.Nil))
		h, err := s.DLQHistory(ctx, m.ID)
		require.NoError(t, err)
		require.Equal(t, []string{dlq.KindIntake}, kinds(h))
	})
}

// Archiving adds an event and keeps the history readable; purging the
// archived message drops its history with it.
func TestHistoryFollowsArchiveAndPurge(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		m := stored(t, s, "a.dlq.v1")
		resolve(t, s, m.ID, t0)
		n, err := s.ArchiveDLQBatch(ctx, t0.Add(time.Second), 100)
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		h, err := s.DLQHistory(ctx, m.ID)
		require.NoError(t, err)
		require.Equal(t, []string{dlq.KindIntake, dlq.KindAttempt, dlq.KindArchived}, kinds(h))
		require.Equal(t, "RESOLVED", detailOf(t, h[2])["status"])
		n, err = s.PurgeDLQArchiveBatch(ctx, time.Now().Add(time.Hour), 100)
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		_, err = s.DLQHistory(ctx, m.ID)
		require.ErrorIs(t, err, derrors.ErrNotFound)
	})
}

// A paused topic's messages are not claimed by the automatic loop, nor
// those of a skipped topic; others are; the pause is stored (a second
// store on the same database sees it) and resuming lets them be claimed.
func TestPausedTopicsAreNotClaimed(t *testing.T) {
	for _, d := range storetest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			dsn := storetest.DSN(t, d)
			s := storetest.OpenDSN(t, d, dsn)
			ctx := ctx(t)
			opts := dlq.IngestOptions{Now: t0, MaxRetries: 3, FirstRetryAt: at(t0)}
			for i, topic := range []string{"a.dlq.v1", "b.dlq.v1", "c.dlq.v1"} {
				_, err := s.IngestDLQ(ctx, []dlq.Incoming{digested(topic, int64(i), `{}`)}, opts)
				require.NoError(t, err)
			}
			before := rowsDigest(t, s, uuid.Nil)
			uid := uint32(7)
			p, created, err := s.PauseDLQTopic(ctx, dlq.TopicPause{Topic: "a.dlq.v1", PausedAt: t0, Reason: "bad deploy", UID: &uid})
			require.NoError(t, err)
			require.True(t, created)
			require.Equal(t, "bad deploy", p.Reason)
			// Pausing again keeps the first pause.
			p2, created, err := s.PauseDLQTopic(ctx, dlq.TopicPause{Topic: "a.dlq.v1", PausedAt: t0.Add(time.Hour), Reason: "again", Auto: true})
			require.NoError(t, err)
			require.False(t, created)
			require.Equal(t, p, p2)
			require.True(t, p2.PausedAt.Equal(t0))
			require.Equal(t, &uid, p2.UID)

			// A second store on the same database (a restart, another daemon) sees it.
			s2 := storetest.OpenDSN(t, d, dsn)
			ps, err := s2.DLQTopicPauses(ctx)
			require.NoError(t, err)
			require.Len(t, ps, 1)
			require.Equal(t, "a.dlq.v1", ps[0].Topic)
			require.False(t, ps[0].Auto)
			require.Equal(t, before, rowsDigest(t, s, uuid.Nil), "a pause changes no dead letter")

			c := dlq.Claim{Owner: "d", Now: t0.Add(time.Minute), LeaseUntil: t0.Add(time.Hour), Sources: []string{"kafka"}, SkipTopics: []string{"c.dlq.v1"}}
			msgs, err := s2.ClaimDueDLQ(ctx, 10, c)
			require.NoError(t, err)
			require.Len(t, msgs, 1)
			require.Equal(t, "b.dlq.v1", msgs[0].Position.Topic)
			require.Equal(t, dlq.StatusPending, onlyMessage(t, s, "a.dlq.v1").Status)

			ok, err := s.ResumeDLQTopic(ctx, "a.dlq.v1", t0.Add(time.Hour))
			require.NoError(t, err)
			require.True(t, ok)
			ok, err = s.ResumeDLQTopic(ctx, "a.dlq.v1", t0.Add(2*time.Hour))
			require.NoError(t, err)
			require.False(t, ok, "not paused any more")
			msgs, err = s2.ClaimDueDLQ(ctx, 10, c)
			require.NoError(t, err)
			require.Len(t, msgs, 1)
			require.Equal(t, "a.dlq.v1", msgs[0].Position.Topic)
			ps, err = s.DLQTopicPauses(ctx)
			require.NoError(t, err)
			require.Empty(t, ps)

			// Paused again after a resume: a new pause.
			p3, created, err := s.PauseDLQTopic(ctx, dlq.TopicPause{Topic: "a.dlq.v1", PausedAt: t0.Add(3 * time.Hour), Reason: "auto", Auto: true})
			require.NoError(t, err)
			require.True(t, created)
			require.True(t, p3.Auto)
			require.Nil(t, p3.UID)
			require.True(t, p3.PausedAt.Equal(t0.Add(3*time.Hour)))
		})
	}
}

// Returns are counted per DLQ topic within a window, for the auto-pause.
func TestCountReturnsPerTopicAndWindow(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		ingest(t, s, t0, digested("a.dlq.v1", 1, `{"a":1}`), digested("b.dlq.v1", 1, `{"b":1}`))
		a, b := onlyMessage(t, s, "a.dlq.v1"), onlyMessage(t, s, "b.dlq.v1")
		for i, m := range []dlq.Message{a, a, b} {
			at := t0.Add(time.Duration(i+1) * time.Minute)
			resolve(t, s, m.ID, at)
			back := digested(m.Position.Topic, int64(10+i), string(m.Payload))
			back.FeedbackOf = &m.ID
			require.Equal(t, 1, ingest(t, s, at, back).Feedback)
		}
		n, err := s.CountReturnsDLQ(ctx, "a.dlq.v1", t0)
		require.NoError(t, err)
		require.EqualValues(t, 2, n)
		n, err = s.CountReturnsDLQ(ctx, "a.dlq.v1", t0.Add(90*time.Second))
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		n, err = s.CountReturnsDLQ(ctx, "b.dlq.v1", t0)
		require.NoError(t, err)
		require.EqualValues(t, 1, n)

		// A resume starts the count again: the returns behind a pause do
		// not cause the next one.
		_, _, err = s.PauseDLQTopic(ctx, dlq.TopicPause{Topic: "a.dlq.v1", PausedAt: t0.Add(2 * time.Minute), Reason: "r", Auto: true})
		require.NoError(t, err)
		ok, err := s.ResumeDLQTopic(ctx, "a.dlq.v1", t0.Add(90*time.Second))
		require.NoError(t, err)
		require.True(t, ok)
		n, err = s.CountReturnsDLQ(ctx, "a.dlq.v1", t0)
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "only the return after the resume")
		n, err = s.CountReturnsDLQ(ctx, "b.dlq.v1", t0)
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "other topics are not affected")
	})
}
