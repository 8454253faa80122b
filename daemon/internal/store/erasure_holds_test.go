package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
)

func TestLegalHolds(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		tenant, other := uuid.NewString(), uuid.NewString()
		alice, bob := int64(1001), int64(1002)

		// A job that waits (PARTIAL) before the hold.
		job := createJob(t, ctx, s, deletion.JobRequest{Tenant: tenant}, t0)
		_ = claimAt(t, ctx, s, "d1", t0, 0)
		require.NoError(t, s.FinishDeletionAttempt(ctx, job.ID, "d1", deletion.JobUpdate{Status: deletion.JobPartial, NextAttemptAt: &t0, Now: t0}))

		hold, created, err := s.PlaceHold(ctx, tenant, "litigation 2026-17", &alice, t0)
		require.NoError(t, err)
		require.True(t, created)
		require.Equal(t, tenant, hold.TenantID)
		require.Equal(t, "litigation 2026-17", hold.Reason)
		require.Equal(t, alice, *hold.HeldByUID)
		require.Nil(t, hold.ReleasedAt)
		again, created, err := s.PlaceHold(ctx, tenant, "another reason", &bob, t0.Add(time.Second))
		require.NoError(t, err)
		require.False(t, created, "one active hold per tenant")
		require.Equal(t, hold.ID, again.ID)
		require.Equal(t, "litigation 2026-17", again.Reason)

		// While held: no new job, the waiting one is not claimed, it shows.
		res, err := s.CreateDeletionJobs(ctx, []deletion.JobRequest{{Tenant: tenant}, {Tenant: other}}, []string{"postgres:app"}, t0)
		require.NoError(t, err)
		require.Nil(t, res[0].Job)
		require.Equal(t, hold.ID, res[0].Hold.ID)
		require.True(t, res[1].Created, "the other tenant of the same request is queued")
		_, _, err = s.CreateDeletionJob(ctx, tenant, []string{"postgres:app"}, t0)
		require.ErrorIs(t, err, deletion.ErrOnHold)
		require.ErrorIs(t, err, derrors.ErrConflict)
		claimed := claimAt(t, ctx, s, "d1", t0.Add(time.Hour), 0)
		require.NotNil(t, claimed)
		require.Equal(t, other, claimed.TenantID, "the held tenant's job waits")
		require.Nil(t, claimAt(t, ctx, s, "d1", t0.Add(time.Hour), 0))
		latest, err := s.LatestDeletionJob(ctx, tenant)
		require.NoError(t, err)
		require.True(t, latest.OnHold)
		require.Equal(t, deletion.JobPartial, latest.Status)
		ctl, err := s.DeletionJobControl(ctx, job.ID)
		require.NoError(t, err)
		require.True(t, ctl.Held)
		active, err := s.ActiveHold(ctx, tenant)
		require.NoError(t, err)
		require.Equal(t, hold.ID, active.ID)

		st, err := s.DeletionJobStats(ctx, t0.Add(time.Hour))
		require.NoError(t, err)
		require.EqualValues(t, 1, st.Held)
		require.EqualValues(t, 1, st.Holds)
		require.EqualValues(t, 1, st.ByStatus[deletion.JobPartial])
		require.EqualValues(t, 1, st.ByStatus[deletion.JobRunning])

		released, err := s.ReleaseHold(ctx, tenant, &bob, t0.Add(time.Minute))
		require.NoError(t, err)
		require.Equal(t, hold.ID, released.ID)
		require.Equal(t, bob, *released.ReleasedByUID)
		require.Equal(t, t0.Add(time.Minute), released.ReleasedAt.UTC())
		_, err = s.ReleaseHold(ctx, tenant, &bob, t0.Add(time.Minute))
		require.ErrorIs(t, err, derrors.ErrNotFound)
		_, err = s.ActiveHold(ctx, tenant)
		require.ErrorIs(t, err, derrors.ErrNotFound)
		require.NotNil(t, claimAt(t, ctx, s, "d1", t0.Add(time.Hour), 0), "released: the job runs")

		// The history: holds placed and released, newest first.
		second, _, err := s.PlaceHold(ctx, tenant, "second case", &alice, t0.Add(2*time.Minute))
		require.NoError(t, err)
		third, _, err := s.PlaceHold(ctx, other, "third case", &alice, t0.Add(3*time.Minute))
		require.NoError(t, err)
		ids := func(f deletion.HoldFilter) []uuid.UUID {
			t.Helper()
			f.Limit = max(f.Limit, 1) * 10
			hs, err := s.ListHolds(ctx, f)
			require.NoError(t, err)
			out := []uuid.UUID{}
			for _, h := range hs {
				out = append(out, h.ID)
			}
			return out
		}
		require.Equal(t, []uuid.UUID{third.ID, second.ID}, ids(deletion.HoldFilter{}), "active ones")
		require.Equal(t, []uuid.UUID{third.ID, second.ID, hold.ID}, ids(deletion.HoldFilter{IncludeReleased: true}))
		require.Equal(t, []uuid.UUID{second.ID, hold.ID}, ids(deletion.HoldFilter{IncludeReleased: true, Tenant: tenant}))
		require.Equal(t, []uuid.UUID{hold.ID}, ids(deletion.HoldFilter{IncludeReleased: true,
			After: &deletion.Cursor{At: second.HeldAt, ID: second.ID}}))
	})
}

func TestReceiptsAndKeys(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		body := []byte(`{"signature":"x","tenant_id":"t"}`)
		never := t0.Add(1000 * time.Hour)
		for i, final := range []deletion.JobStatus{deletion.JobPartial, deletion.JobCompleted} {
			job := createJob(t, ctx, s, deletion.JobRequest{Tenant: uuid.NewString()}, t0)
			_ = claimAt(t, ctx, s, "d1", t0.Add(time.Duration(i)*time.Hour), 0)
			require.NoError(t, s.FinishDeletionAttempt(ctx, job.ID, "d1", deletion.JobUpdate{Status: final, Verified: final == deletion.JobCompleted,
				NextAttemptAt: &never, Now: t0, Receipt: &deletion.SignedReceipt{KeyID: "sha256:k", Body: body}}))
			rec, err := s.DeletionReceipt(ctx, job.ID)
			if final != deletion.JobCompleted {
				require.ErrorIs(t, err, derrors.ErrNotFound, "only a COMPLETED job keeps a receipt")
				continue
			}
			require.NoError(t, err)
			require.Equal(t, body, rec.Body, "byte for byte")
			require.Equal(t, "sha256:k", rec.KeyID)
		}

		k := deletion.ReceiptKey{ID: "sha256:abc", Algorithm: "Ed25519", PublicKey: []byte{1, 2, 3}, RegisteredAt: t0}
		require.NoError(t, s.RegisterReceiptKey(ctx, k))
		require.NoError(t, s.RegisterReceiptKey(ctx, deletion.ReceiptKey{ID: k.ID, Algorithm: "Ed25519", PublicKey: []byte{1, 2, 3}, RegisteredAt: t0.Add(time.Hour)}))
		got, err := s.ReceiptKey(ctx, k.ID)
		require.NoError(t, err)
		require.Equal(t, k.PublicKey, got.PublicKey)
		require.Equal(t, t0, got.RegisteredAt.UTC(), "the first registration stays")
		_, err = s.ReceiptKey(ctx, "sha256:unknown")
		require.ErrorIs(t, err, derrors.ErrNotFound)
	})
}

func TestDeletionJobStatsOverdue(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		early, late := t0.Add(time.Minute), t0.Add(time.Hour)
		createJob(t, ctx, s, deletion.JobRequest{Tenant: uuid.NewString(), NotBefore: &late}, t0)
		held := uuid.NewString()
		createJob(t, ctx, s, deletion.JobRequest{Tenant: held, NotBefore: &early}, t0)
		_, _, err := s.PlaceHold(ctx, held, "case", nil, t0)
		require.NoError(t, err)
		st, err := s.DeletionJobStats(ctx, t0.Add(10*time.Minute))
		require.NoError(t, err)
		require.Nil(t, st.OldestOverdue, "a held job waits on purpose; the other is not due")
		require.EqualValues(t, 2, st.ByStatus[deletion.JobScheduled])

		due := t0.Add(5 * time.Minute)
		createJob(t, ctx, s, deletion.JobRequest{Tenant: uuid.NewString(), NotBefore: &due}, t0)
		st, err = s.DeletionJobStats(ctx, t0.Add(10*time.Minute))
		require.NoError(t, err)
		require.NotNil(t, st.OldestOverdue)
		require.Equal(t, due, st.OldestOverdue.UTC())
	})
}
