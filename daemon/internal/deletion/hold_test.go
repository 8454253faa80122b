package deletion_test

import (
	"context"
	"crypto/ed25519"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/receipt"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/migrations"
)

// TestHoldBlocksAScheduledJobAndReleaseLetsItRun: a hold placed while the
// job waits for its time keeps it waiting past it, refuses new requests,
// and its release lets the job run to completion.
func TestHoldBlocksAScheduledJobAndReleaseLetsItRun(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, st store.Store) {
		tenant := uuid.NewString()
		d := newBatchDeleter(100, time.Millisecond)
		d.seed(tenant, map[string]int64{"t": 300})
		// A grace period long enough that the hold is placed before it ends
		// even on a loaded machine.
		_, svc := daemonOf(t, st, batchDeleters{"x": d}, "d1", 2*time.Second, nil)
		job, _, err := svc.StartDeletion(ctx, tenant, deletion.StartOptions{})
		require.NoError(t, err)
		require.Equal(t, deletion.JobScheduled, job.Status)
		uid := int64(7)
		hold, created, err := svc.Hold(ctx, tenant, "  litigation 2026-17 ", &uid)
		require.NoError(t, err)
		require.True(t, created)
		require.Equal(t, "litigation 2026-17", hold.Reason, "trimmed")

		time.Sleep(time.Until(*job.NotBefore) + 700*time.Millisecond) // well past not_before
		require.Zero(t, d.batches.Load(), "a held job does not run")
		waiting, err := st.LatestDeletionJob(ctx, tenant)
		require.NoError(t, err)
		require.Equal(t, deletion.JobScheduled, waiting.Status)
		require.True(t, waiting.OnHold)
		_, _, err = svc.StartDeletion(ctx, tenant, deletion.StartOptions{})
		require.ErrorIs(t, err, deletion.ErrOnHold)
		require.ErrorContains(t, err, "litigation 2026-17")
		_, _, err = svc.Hold(ctx, tenant, "another case", &uid)
		require.ErrorIs(t, err, derrors.ErrConflict, "one hold at a time")
		_, created, err = svc.Hold(ctx, tenant, "litigation 2026-17", &uid)
		require.NoError(t, err, "the same hold again is no change")
		require.False(t, created)

		released, err := svc.Release(ctx, tenant, &uid)
		require.NoError(t, err)
		require.NotNil(t, released.ReleasedAt)
		done := waitFor(t, st, tenant, completed, "runs after the release")
		require.Equal(t, job.ID, done.ID)
		require.True(t, done.Verified)
		require.EqualValues(t, 300, done.Deleters[0].DeletedCount)
		_, err = svc.Release(ctx, tenant, &uid)
		require.ErrorIs(t, err, derrors.ErrNotFound)
	})
}

// TestHoldStopsARunningJob: a hold stops a running job at its next batch;
// it waits PARTIAL with exact counts and finishes after the release.
func TestHoldStopsARunningJob(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, st store.Store) {
		tenant := uuid.NewString()
		d := newBatchDeleter(10, 20*time.Millisecond)
		d.seed(tenant, map[string]int64{"a": 200, "b": 200})
		_, svc := daemonOf(t, st, batchDeleters{"x": d}, "d1", 0, nil)
		_, _, err := svc.StartDeletion(ctx, tenant, deletion.StartOptions{})
		require.NoError(t, err)
		waitFor(t, st, tenant, func(j *deletion.Job) bool { return j.Deleters[0].DeletedCount >= 30 }, "deleting")
		_, _, err = svc.Hold(ctx, tenant, "audit", nil)
		require.NoError(t, err)
		held := waitFor(t, st, tenant, func(j *deletion.Job) bool { return j.Status == deletion.JobPartial }, "stopped")
		require.True(t, held.OnHold)
		require.Contains(t, held.LastError, "legal hold")
		require.Equal(t, 400-sumOf(d.left(tenant)), held.Deleters[0].DeletedCount, "exact")
		batches := d.batches.Load()
		time.Sleep(10 * runnerConfig().PollInterval)
		require.Equal(t, batches, d.batches.Load(), "nothing runs while held")

		_, err = svc.Release(ctx, tenant, nil)
		require.NoError(t, err)
		done := waitFor(t, st, tenant, completed, "completes after the release")
		require.EqualValues(t, 400, done.Deleters[0].DeletedCount, "the counts of both attempts add up")
		require.Equal(t, map[string]int64{"a": 200, "b": 200}, done.Deleters[0].DeletedBreakdown)
	})
}

// TestMaxJobsAcrossRunners: many tenants, max_jobs 3, two runners sharing
// the store (on PostgreSQL two daemons' pools): every job completes and
// never more than 3 delete at once.
func TestMaxJobsAcrossRunners(t *testing.T) {
	for _, dialect := range storetest.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			ctx := testsvc.Context(t, 2*time.Minute)
			dsn := storetest.DSN(t, dialect)
			stores := []store.Store{storetest.OpenDSN(t, dialect, dsn)}
			if dialect == migrations.Postgres {
				stores = append(stores, storetest.OpenDSN(t, dialect, dsn))
			}
			// Jobs long enough (3 batches of 30 ms) that a claim, slow on a
			// loaded machine, still finds the previous ones running.
			d := newBatchDeleter(5, 30*time.Millisecond)
			var tenants []string
			for i := 0; i < 30; i++ {
				tenants = append(tenants, uuid.NewString())
				d.seed(tenants[i], map[string]int64{"t": 15})
			}
			d.seed("bystander", map[string]int64{"t": 9})
			var svc *deletion.Service
			// A lease no loaded machine lets lapse: a lapsed lease hands a
			// running job to the other daemon by design, which this test
			// would count as a fourth job.
			for i, st := range stores {
				_, s := daemonOf(t, st, batchDeleters{"x": d}, "d"+string(rune('1'+i)), 0, func(c *deletion.RunnerConfig) { c.MaxJobs, c.Lease = 3, 5*time.Second })
				svc = s
			}
			res, err := svc.StartDeletions(ctx, tenants, deletion.StartOptions{})
			require.NoError(t, err)
			require.Len(t, res, 30)
			// One waiter at a time: thirty polling at once queue on the
			// SQLite store's one connection ahead of the runners.
			for _, tn := range tenants {
				waitFor(t, stores[0], tn, completed, "completed")
			}
			require.LessOrEqual(t, d.maxRun.Load(), int32(3), "never more than max_jobs at once")
			require.GreaterOrEqual(t, d.maxRun.Load(), int32(2), "jobs do run side by side")
			require.Equal(t, map[string]int64{"t": 9}, d.left("bystander"))
		})
	}
}

// TestReceiptIssuedForAVerifiedJob: the runner stores a signed receipt with
// the job it completed and verified, and it verifies with the notary's key.
func TestReceiptIssuedForAVerifiedJob(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, st store.Store) {
		pub, priv, err := ed25519.GenerateKey(nil)
		require.NoError(t, err)
		notary := receipt.NewNotary(priv, "d1", func() map[string]receipt.Plugin {
			return map[string]receipt.Plugin{"x": {Plugin: "mem", Version: "1.0", SHA256: "abc", ConfigSHA256: "sha256:def"}}
		})
		tenant := uuid.NewString()
		d := newBatchDeleter(7, time.Millisecond)
		d.seed(tenant, map[string]int64{"a": 20, "b": 3})
		reg := deletion.NewRegistry(batchDeleters{"x": d}, func() int { return 2 })
		var noVerify atomic.Bool
		r := deletion.NewRunner(st, reg, "d1", func() deletion.RunnerConfig {
			cfg := runnerConfig()
			cfg.Notary, cfg.Verify = notary, !noVerify.Load()
			return cfg
		}, hclogNull(), nil, nil)
		require.NoError(t, r.Start(ctx))
		t.Cleanup(func() { _ = r.Stop(context.Background()) })
		svc := deletion.NewService(st, reg, r, deletion.ServiceOptions{Notary: notary,
			Config: func() deletion.ServiceConfig { return deletion.ServiceConfig{TenantIDFormat: "uuid"} }})

		_, err = svc.Receipt(ctx, tenant)
		require.ErrorIs(t, err, derrors.ErrNotFound, "no job, no receipt")
		job, _, err := svc.StartDeletion(ctx, tenant, deletion.StartOptions{})
		require.NoError(t, err)
		done := waitFor(t, st, tenant, completed, "completed")
		rec, err := svc.Receipt(ctx, tenant)
		require.NoError(t, err)
		require.Equal(t, receipt.KeyID(pub), rec.KeyID)
		rep := receipt.Verify(rec.Body, func(string) (ed25519.PublicKey, string, error) { return pub, "test", nil }, receipt.Options{})
		require.True(t, rep.Valid, "%+v", rep.Checks)
		require.Equal(t, tenant, rep.Doc.TenantID)
		require.Equal(t, job.ID.String(), rep.Doc.JobID)
		require.EqualValues(t, 23, rep.Doc.DeletedTotal)
		require.Equal(t, map[string]int64{"a": 20, "b": 3}, rep.Doc.Deleters[0].Deleted)
		require.Equal(t, "1.0", rep.Doc.Deleters[0].PluginVersion)
		require.Equal(t, deletion.FormatTime(*done.StartedAt), rep.Doc.StartedAt)
		require.Equal(t, deletion.FormatTime(*done.FinishedAt), rep.Doc.FinishedAt)

		// Without verification there is nothing to prove.
		noVerify.Store(true)
		other := uuid.NewString()
		d.seed(other, map[string]int64{"a": 1})
		_, _, err = svc.StartDeletion(ctx, other, deletion.StartOptions{})
		require.NoError(t, err)
		waitFor(t, st, other, completed, "completed")
		_, err = svc.Receipt(ctx, other)
		require.ErrorIs(t, err, derrors.ErrNotFound)
		require.ErrorContains(t, err, "without verification")
	})
}
