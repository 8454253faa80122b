package store_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/migrations"
)

// The history migration turns the attempts already in attempt_log into
// events, in order, with their own times and uids; down and up again it
// does it once more, from the same attempts, and nothing else changes.
func TestHistoryMigrationCarriesOverAttempts(t *testing.T) {
	eachEmpty(t, func(t *testing.T, d migrations.Dialect, dsn string) {
		s, err := store.Open(ctx(t), d, dsn)
		require.NoError(t, err)
		ingest(t, s, t0, incoming("m.dlq.v1", 1, `{}`), incoming("other.dlq.v1", 1, `{}`))
		m := onlyMessage(t, s, "m.dlq.v1")
		uid := uint32(77)
		c := claimed(t, s, m.ID, dlq.Claim{Owner: "d", Now: t0.Add(time.Minute), LeaseUntil: t0.Add(time.Hour)})
		o := dlq.Finish(*c, dlq.EventRefused)
		o.At, o.Attempted, o.UID, o.Trigger, o.Error = t0.Add(time.Minute), true, &uid, dlq.TriggerManual, "nope"
		finished(t, s, "d", t0.Add(time.Minute), []dlq.Outcome{o})
		resolve(t, s, m.ID, t0.Add(2*time.Minute))
		before := rowsDigest(t, s, uuid.Nil)
		require.NoError(t, s.Close())

		db, err := sql.Open(driverOf(d), dsn)
		require.NoError(t, err)
		defer db.Close()
		steps := stepsThrough(t, d, "dlq_history_policy")
		require.NoError(t, migrations.Steps(d, db, -steps))
		require.NoError(t, migrations.Steps(d, db, steps))

		s, err = store.Open(ctx(t), d, dsn)
		require.NoError(t, err)
		defer s.Close()
		h, err := s.DLQHistory(ctx(t), m.ID)
		require.NoError(t, err)
		require.Equal(t, []string{dlq.KindIntake, dlq.KindAttempt, dlq.KindAttempt}, kinds(h))
		require.True(t, h[1].At.Equal(t0.Add(time.Minute)), h[1].At)
		require.Equal(t, &uid, h[1].UID)
		require.Equal(t, "nope", detailOf(t, h[1])["error"])
		require.True(t, h[2].At.Equal(t0.Add(2*time.Minute)), h[2].At)
		require.Equal(t, dlq.OutcomeResolved, detailOf(t, h[2])["outcome"])
		other := onlyMessage(t, s, "other.dlq.v1")
		oh, err := s.DLQHistory(ctx(t), other.ID)
		require.NoError(t, err)
		require.Equal(t, []string{dlq.KindIntake}, kinds(oh))
		require.Equal(t, before, rowsDigest(t, s, uuid.Nil), "no dead letter changed")
	})
}
