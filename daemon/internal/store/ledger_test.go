package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/ledger"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
)

// finishAs claims the tenant's job and ends its attempt with u.
func finishAs(t *testing.T, ctx context.Context, s store.Store, tenant string, at time.Time, u deletion.JobUpdate) *deletion.Job {
	t.Helper()
	job := createJob(t, ctx, s, deletion.JobRequest{Tenant: tenant}, at)
	claimed := claimAt(t, ctx, s, "d1", at, 0)
	require.NotNil(t, claimed)
	require.Equal(t, job.ID, claimed.ID)
	u.Now = at
	require.NoError(t, s.FinishDeletionAttempt(ctx, job.ID, "d1", u))
	return job
}

// TestLedgerEntryWrittenWithCompletion: a COMPLETED and verified job gets
// its ledger entry (with the receipt's hash) in the write that completes
// it; a PARTIAL job, an unverified completion and a lost lease get none.
func TestLedgerEntryWrittenWithCompletion(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		a, b, c := uuid.NewString(), uuid.NewString(), uuid.NewString()
		body := []byte(`{"signed":"receipt"}`)
		done := finishAs(t, ctx, s, a, t0, deletion.JobUpdate{Status: deletion.JobCompleted, Verified: true,
			Receipt: &deletion.SignedReceipt{KeyID: "sha256:k", Body: body}})
		next := t0.Add(time.Hour)
		finishAs(t, ctx, s, b, t0.Add(time.Second), deletion.JobUpdate{Status: deletion.JobPartial, NextAttemptAt: &next, LastError: "x"})
		finishAs(t, ctx, s, c, t0.Add(2*time.Second), deletion.JobUpdate{Status: deletion.JobCompleted, Verified: false})

		entries, err := s.LedgerEntries(ctx)
		require.NoError(t, err)
		require.Len(t, entries, 1, "only the verified completion")
		e := entries[0]
		require.Equal(t, a, e.TenantID)
		require.Equal(t, done.ID, e.JobID)
		require.True(t, t0.Equal(e.ErasedAt), "erased at %s", e.ErasedAt)
		require.Equal(t, ledger.ReceiptHash(body), e.ReceiptSHA256)
		require.Regexp(t, `^sha256:[0-9a-f]{64}$`, e.ReceiptSHA256)
		require.Equal(t, ledger.SourceLocal, e.Source)

		// A finish whose lease was lost writes nothing, ledger included.
		d := uuid.NewString()
		job := createJob(t, ctx, s, deletion.JobRequest{Tenant: d}, t0)
		require.NotNil(t, claimAt(t, ctx, s, "d1", t0, 0))
		err = s.FinishDeletionAttempt(ctx, job.ID, "someone-else", deletion.JobUpdate{Status: deletion.JobCompleted, Verified: true, Now: t0})
		require.ErrorIs(t, err, derrors.ErrLeaseLost)
		entries, err = s.LedgerEntries(ctx)
		require.NoError(t, err)
		require.Len(t, entries, 1)
	})
}

// TestLedgerImportIsIdempotent: entries are added once by job id; a
// second import of the same entries adds nothing; a local entry wins.
func TestLedgerImportIsIdempotent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		local := finishAs(t, ctx, s, uuid.NewString(), t0, deletion.JobUpdate{Status: deletion.JobCompleted, Verified: true,
			Receipt: &deletion.SignedReceipt{KeyID: "k", Body: []byte("r")}})
		imported := []ledger.Entry{
			{TenantID: uuid.NewString(), JobID: uuid.New(), ErasedAt: t0.Add(-time.Hour), ReceiptSHA256: ledger.ReceiptHash([]byte("1"))},
			{TenantID: uuid.NewString(), JobID: uuid.New(), ErasedAt: t0.Add(-2 * time.Hour), ReceiptSHA256: ""},
			{TenantID: "another spelling", JobID: local.ID, ErasedAt: t0.Add(-3 * time.Hour), ReceiptSHA256: "sha256:00"},
		}
		added, err := s.ImportLedger(ctx, imported, t0)
		require.NoError(t, err)
		require.Equal(t, 2, added, "the local job's entry is kept, not replaced")
		added, err = s.ImportLedger(ctx, imported, t0.Add(time.Minute))
		require.NoError(t, err)
		require.Zero(t, added)
		entries, err := s.LedgerEntries(ctx)
		require.NoError(t, err)
		require.Len(t, entries, 3)
		require.Equal(t, imported[1].JobID, entries[0].JobID, "oldest first")
		require.Equal(t, ledger.SourceImport, entries[0].Source)
		require.Equal(t, local.ID, entries[2].JobID)
		require.Equal(t, ledger.SourceLocal, entries[2].Source)
		require.NotEqual(t, "another spelling", entries[2].TenantID)
	})
}

// TestLedgerTenantsPagesLatestErasure: one row per tenant, its latest
// erasure, in tenant order, with busy set while it has an unfinished job.
func TestLedgerTenantsPagesLatestErasure(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		var entries []ledger.Entry
		tenants := map[string]uuid.UUID{}
		for i := 0; i < 7; i++ {
			tenant := uuid.NewString()
			for k := 0; k < 2; k++ {
				e := ledger.Entry{TenantID: tenant, JobID: uuid.New(), ErasedAt: t0.Add(time.Duration(k) * time.Hour), ReceiptSHA256: ""}
				entries = append(entries, e)
				tenants[tenant] = e.JobID // the later one
			}
		}
		_, err := s.ImportLedger(ctx, entries, t0)
		require.NoError(t, err)
		var busy string
		for tn := range tenants {
			busy = tn
			break
		}
		createJob(t, ctx, s, deletion.JobRequest{Tenant: busy}, t0)

		seen := map[string]bool{}
		after := ""
		for {
			page, err := s.LedgerTenants(ctx, after, 3)
			require.NoError(t, err)
			for _, l := range page {
				require.Greater(t, l.TenantID, after, "tenant order")
				require.False(t, seen[l.TenantID], "once per tenant")
				seen[l.TenantID] = true
				require.Equal(t, tenants[l.TenantID], l.JobID, "the latest erasure")
				require.Equal(t, l.TenantID == busy, l.Busy)
				after = l.TenantID
			}
			if len(page) < 3 {
				break
			}
		}
		require.Len(t, seen, 7)
	})
}

// TestReverifyLeaseOnePassPerInterval: while one daemon holds the lease no
// other gets it; after a completed pass none gets it until the interval
// passed, unless forced; a dead owner's lease is taken when it expires.
func TestReverifyLeaseOnePassPerInterval(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		day := 24 * time.Hour
		got, err := s.AcquireReverifyLease(ctx, "d1", t0, t0.Add(time.Minute), t0.Add(-day), false)
		require.NoError(t, err)
		require.True(t, got, "the first pass is due")
		got, err = s.AcquireReverifyLease(ctx, "d2", t0.Add(time.Second), t0.Add(time.Minute), t0.Add(-day), true)
		require.NoError(t, err)
		require.False(t, got, "d1 holds a live lease, even against a forced pass")
		require.NoError(t, s.RenewReverifyLease(ctx, "d1", t0.Add(2*time.Minute)))
		require.ErrorIs(t, s.RenewReverifyLease(ctx, "d2", t0.Add(2*time.Minute)), derrors.ErrLeaseLost)
		require.NoError(t, s.ReleaseReverifyLease(ctx, "d1", t0.Add(time.Minute), true))

		at := t0.Add(2 * time.Minute)
		got, err = s.AcquireReverifyLease(ctx, "d2", at, at.Add(time.Minute), at.Add(-day), false)
		require.NoError(t, err)
		require.False(t, got, "the pass of this interval is done")
		got, err = s.AcquireReverifyLease(ctx, "d2", at, at.Add(time.Minute), at.Add(-day), true)
		require.NoError(t, err)
		require.True(t, got, "forced")
		// d2 dies; its lease runs out.
		later := at.Add(2 * time.Minute)
		require.NoError(t, s.ReleaseReverifyLease(ctx, "nobody", later, true), "not the owner: nothing changes")
		got, err = s.AcquireReverifyLease(ctx, "d1", later, later.Add(time.Minute), later.Add(-day), false)
		require.NoError(t, err)
		require.False(t, got, "d1's pass finished within the interval; d2's failed one is not recorded as finished")
		got, err = s.AcquireReverifyLease(ctx, "d1", later, later.Add(time.Minute), later.Add(-time.Second), false)
		require.NoError(t, err)
		require.True(t, got, "d2's lease expired and the pass is due")
		require.ErrorIs(t, s.RenewReverifyLease(ctx, "d2", later.Add(time.Hour)), derrors.ErrLeaseLost)
	})
}

// TestRecordResurrection: the first finding opens a resurrection (New),
// later ones update it; with reerase a job is created and linked, whose
// ReerasureOf names the erasure; a held tenant gets HELD and no job; a
// clean pass resolves it; other tenants' jobs and entries are untouched.
func TestRecordResurrection(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		a, held, bystander := uuid.NewString(), uuid.NewString(), uuid.NewString()
		first := finishAs(t, ctx, s, a, t0, deletion.JobUpdate{Status: deletion.JobCompleted, Verified: true,
			Receipt: &deletion.SignedReceipt{KeyID: "k", Body: []byte("receipt-a")}})
		finishAs(t, ctx, s, held, t0, deletion.JobUpdate{Status: deletion.JobCompleted, Verified: true})
		byJob := createJob(t, ctx, s, deletion.JobRequest{Tenant: bystander}, t0)
		latest := func(tenant string) ledger.Latest {
			page, err := s.LedgerTenants(ctx, "", 100)
			require.NoError(t, err)
			for _, l := range page {
				if l.TenantID == tenant {
					return l
				}
			}
			t.Fatalf("tenant %s not in the ledger", tenant)
			return ledger.Latest{}
		}
		la := latest(a)
		require.Equal(t, first.ID, la.JobID)
		require.Equal(t, ledger.ReceiptHash([]byte("receipt-a")), la.ReceiptSHA256)

		at := t0.Add(time.Hour)
		rec, err := s.RecordResurrection(ctx, ledger.Found{Latest: la, Counts: map[string]int64{"postgres:app": 3}, At: at})
		require.NoError(t, err)
		require.True(t, rec.New)
		require.False(t, rec.JobCreated)
		require.Equal(t, ledger.ActionReported, rec.Resurrection.Action)
		require.Nil(t, rec.Resurrection.ReeraseJobID)

		at2 := at.Add(time.Hour)
		rec, err = s.RecordResurrection(ctx, ledger.Found{Latest: la, Counts: map[string]int64{"postgres:app": 4}, At: at2,
			Reerase: true, Deleters: []string{"postgres:app", "redis:sessions"}})
		require.NoError(t, err)
		require.False(t, rec.New, "the open resurrection is updated")
		require.True(t, rec.JobCreated)
		r := rec.Resurrection
		require.Equal(t, ledger.ActionReerase, r.Action)
		require.Equal(t, 2, r.SeenCount)
		require.Equal(t, map[string]int64{"postgres:app": 4}, r.Counts)
		require.True(t, at.Equal(r.FoundAt))
		require.True(t, at2.Equal(r.LastSeenAt))
		require.NotNil(t, r.ReeraseJobID)
		job, err := s.LatestDeletionJob(ctx, a)
		require.NoError(t, err)
		require.Equal(t, *r.ReeraseJobID, job.ID)
		require.Equal(t, deletion.JobPending, job.Status)
		require.Len(t, job.Deleters, 2)
		ref, err := s.ReerasureOf(ctx, job.ID)
		require.NoError(t, err)
		require.Equal(t, &deletion.ReerasureRef{JobID: first.ID, ReceiptSHA256: la.ReceiptSHA256}, ref)
		none, err := s.ReerasureOf(ctx, first.ID)
		require.NoError(t, err)
		require.Nil(t, none, "the first erasure repeats nothing")
		again, err := s.RecordResurrection(ctx, ledger.Found{Latest: la, Counts: map[string]int64{"postgres:app": 4}, At: at2,
			Reerase: true, Deleters: []string{"postgres:app"}})
		require.NoError(t, err)
		require.False(t, again.JobCreated, "the tenant's active job is linked, not duplicated")
		require.Equal(t, job.ID, *again.Resurrection.ReeraseJobID)

		// Held: reported, never erased.
		_, _, err = s.PlaceHold(ctx, held, "litigation", nil, at)
		require.NoError(t, err)
		hr, err := s.RecordResurrection(ctx, ledger.Found{Latest: latest(held), Counts: map[string]int64{"redis:sessions": 1}, At: at,
			Reerase: true, Deleters: []string{"redis:sessions"}})
		require.NoError(t, err)
		require.True(t, hr.New)
		require.False(t, hr.JobCreated)
		require.Equal(t, ledger.ActionHeld, hr.Resurrection.Action)
		hj, err := s.LatestDeletionJob(ctx, held)
		require.NoError(t, err)
		require.Equal(t, deletion.JobCompleted, hj.Status, "no new job for a held tenant")

		// Resolved by a clean pass; a new finding then opens a new one.
		ok, err := s.ResolveResurrection(ctx, a, at2.Add(time.Hour))
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = s.ResolveResurrection(ctx, a, at2.Add(time.Hour))
		require.NoError(t, err)
		require.False(t, ok)
		list, err := s.Resurrections(ctx, a)
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.NotNil(t, list[0].ResolvedAt)

		// The bystander's job is as it was.
		bj, err := s.LatestDeletionJob(ctx, bystander)
		require.NoError(t, err)
		require.Equal(t, byJob.ID, bj.ID)
		require.Equal(t, deletion.JobPending, bj.Status)
		list, err = s.Resurrections(ctx, bystander)
		require.NoError(t, err)
		require.Empty(t, list)
	})
}

// TestReeraseUnderRequireApprovalAwaitsApproval: with require_approval a
// re-erase job is not an exception: it waits for an operator's approval of
// the current plan instead of running at once (it ran under a plan nobody
// approved).
func TestReeraseUnderRequireApprovalAwaitsApproval(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		a := uuid.NewString()
		finishAs(t, ctx, s, a, t0, deletion.JobUpdate{Status: deletion.JobCompleted, Verified: true,
			Receipt: &deletion.SignedReceipt{KeyID: "k", Body: []byte("receipt-a")}})
		page, err := s.LedgerTenants(ctx, "", 100)
		require.NoError(t, err)
		require.Len(t, page, 1)
		at := t0.Add(time.Hour)
		rec, err := s.RecordResurrection(ctx, ledger.Found{Latest: page[0], Counts: map[string]int64{"postgres:app": 2}, At: at,
			Reerase: true, RequireApproval: true, Deleters: []string{"postgres:app"}})
		require.NoError(t, err)
		require.True(t, rec.JobCreated)
		job, err := s.LatestDeletionJob(ctx, a)
		require.NoError(t, err)
		require.Equal(t, *rec.Resurrection.ReeraseJobID, job.ID)
		require.Equal(t, deletion.JobAwaitingApproval, job.Status)
		require.True(t, job.ApprovalRequired)
		require.Nil(t, job.NextAttemptAt)
		claimed, err := s.ClaimDeletionJob(ctx, "d1", at.Add(time.Minute), at.Add(2*time.Minute), 0)
		require.NoError(t, err)
		require.Nil(t, claimed, "a job awaiting approval is never claimed")
	})
}
