package deletion_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/adminapi"
	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
	"github.com/lifecycled/lifecycled/daemon/wire"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/migrations"
	"github.com/lifecycled/lifecycled/sdk"
)

func run(t *testing.T, st deletion.JobStore, src deletion.Deleters, cfg func(*deletion.RunnerConfig)) *deletion.Service {
	t.Helper()
	reg := deletion.NewRegistry(src, func() int { return 4 })
	r := deletion.NewRunner(st, reg, "live", func() deletion.RunnerConfig {
		c := runnerConfig()
		if cfg != nil {
			cfg(&c)
		}
		return c
	}, hclog.NewNullLogger(), nil, nil)
	require.NoError(t, r.Start(testsvc.Context(t, time.Minute)))
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	return deletion.NewService(st, reg, r, deletion.ServiceOptions{Config: func() deletion.ServiceConfig { return deletion.ServiceConfig{TenantIDFormat: "uuid"} }})
}

func waitFor(t *testing.T, st deletion.JobStore, tenant string, cond func(j *deletion.Job) bool, what string) *deletion.Job {
	t.Helper()
	var job *deletion.Job
	testsvc.Eventually(t, 20*time.Second, func() bool {
		var err error
		job, err = st.LatestDeletionJob(testsvc.Context(t, time.Minute), tenant)
		return err == nil && cond(job)
	}, "%s (job: %+v)", what, job)
	return job
}

func completed(j *deletion.Job) bool { return j.Status == deletion.JobCompleted }

func deleterJSON(j wire.Job, name string) wire.DeleterProgress {
	for _, d := range j.Deleters {
		if d.Name == name {
			return d
		}
	}
	return wire.DeleterProgress{}
}

// TestBreakdownIsExactAcrossADeadDaemon: a daemon deleted 7 rows of one
// table, reported only 3 of them and died. The daemon that takes the job
// over derives what is gone per table from the count before the first
// attempt and the count now, as it does for the deleter's total.
func TestBreakdownIsExactAcrossADeadDaemon(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, st store.Store) {
		d := tables(tenant, map[string]int64{"public.steps": 8, "public.instances": 4}, "other", map[string]int64{"public.steps": 5})
		src := configured("postgres:app", d)
		job, _, err := st.CreateDeletionJob(ctx, tenant, src.names, time.Now())
		require.NoError(t, err)
		now := time.Now()
		_, err = st.ClaimDeletionJob(ctx, "dead", now, now.Add(300*time.Millisecond), 0)
		require.NoError(t, err)
		require.NoError(t, st.SetDeleterState(ctx, job.ID, "dead", deletion.DeleterState{Name: "postgres:app", Status: deletion.DeleterRunning,
			DeletedCount: 3, Total: 12, Attempts: 1, UpdatedAt: now,
			TotalBreakdown:   map[string]int64{"public.steps": 8, "public.instances": 4},
			DeletedBreakdown: map[string]int64{"public.steps": 0, "public.instances": 0}}))
		d.set(func(d *tableDeleter) { d.items[tenant]["public.steps"] = 1 })

		run(t, st, src, nil)
		done := waitFor(t, st, tenant, completed, "job completes")
		require.True(t, done.Verified)
		j := adminapi.JobBody(done)
		want := map[string]int64{"public.steps": 8, "public.instances": 4}
		require.Equal(t, deletion.Result{DeletedCount: 12, Breakdown: want}, j.Report.Succeeded["postgres:app"])
		require.Equal(t, want, deleterJSON(j, "postgres:app").Breakdown)
		require.Equal(t, map[string]deletion.Verification{"postgres:app": {Count: 0, Breakdown: map[string]int64{"public.steps": 0, "public.instances": 0}, Method: deletion.MethodCount}},
			j.Report.Verification)
		require.Equal(t, map[string]int64{"public.steps": 5}, d.left("other"), "the other tenant is untouched")
	})
}

// TestBreakdownIsExactAcrossAFailedAttempt: a delete that fails part way
// reports only a total; the next attempt's count puts every table right.
func TestBreakdownIsExactAcrossAFailedAttempt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, st store.Store) {
		d := tables(tenant, map[string]int64{"a": 6, "b": 4, "c": 0})
		d.failAfter = 8
		src := configured("postgres:app", d)
		// The second attempt (2 items left) succeeds: the job must stay
		// PARTIAL long enough for the poll below to see it, even on a busy
		// machine.
		svc := run(t, st, src, func(c *deletion.RunnerConfig) {
			c.RetryPolicy.Initial, c.RetryPolicy.Max = 3*time.Second, 3*time.Second
		})
		_, _, err := svc.StartDeletion(testsvc.Context(t, time.Minute), tenant, deletion.StartOptions{})
		require.NoError(t, err)
		partial := waitFor(t, st, tenant, func(j *deletion.Job) bool { return j.Status == deletion.JobPartial }, "first attempt fails")
		pj := adminapi.JobBody(partial)
		require.EqualValues(t, 8, deleterJSON(pj, "postgres:app").DeletedCount)
		require.Equal(t, map[string]int64{"a": 0, "b": 0, "c": 0}, deleterJSON(pj, "postgres:app").Breakdown,
			"a failed delete reports no breakdown: nothing is claimed per table yet")
		require.Nil(t, pj.Report.Verification, "no verification ran")

		d.set(func(d *tableDeleter) { d.failAfter = 0 })
		done := waitFor(t, st, tenant, completed, "job completes")
		j := adminapi.JobBody(done)
		require.Equal(t, deletion.Result{DeletedCount: 10, Breakdown: map[string]int64{"a": 6, "b": 4, "c": 0}}, j.Report.Succeeded["postgres:app"])
		require.Equal(t, int64(0), j.Report.Verification["postgres:app"].Count)
	})
}

// TestBreakdownFromCountsWhenThePluginReportsNone: a plugin whose Delete
// reports only a total still gets an exact breakdown, from the counts
// before and after (the verification).
func TestBreakdownFromCountsWhenThePluginReportsNone(t *testing.T) {
	d := tables(tenant, map[string]int64{"session:{tenant}:*": 5, "csrf:{tenant}:*": 2})
	d.noDeleteBreakdown = true
	st := storetest.Open(t, migrations.SQLite)
	svc := run(t, st, configured("redis:sessions", d), nil)
	_, _, err := svc.StartDeletion(testsvc.Context(t, time.Minute), tenant, deletion.StartOptions{})
	require.NoError(t, err)
	j := adminapi.JobBody(waitFor(t, st, tenant, completed, "job completes"))
	require.Equal(t, deletion.Result{DeletedCount: 7, Breakdown: map[string]int64{"session:{tenant}:*": 5, "csrf:{tenant}:*": 2}},
		j.Report.Succeeded["redis:sessions"])
}

// TestStoredNonCanonicalIDRunsWithTheCanonicalID: a job whose stored id is
// spelled otherwise (stored before ids were canonical) is run, counted and
// verified with the canonical spelling only.
func TestStoredNonCanonicalIDRunsWithTheCanonicalID(t *testing.T) {
	const upper, lower = "44444444-DDDD-4DDD-8DDD-444444444444", "44444444-dddd-4ddd-8ddd-444444444444"
	storetest.Each(t, func(t *testing.T, ctx context.Context, st store.Store) {
		d := tables(lower, map[string]int64{"k": 3}, upper, map[string]int64{"k": 7})
		src := configured("redis:sessions", d)
		_, _, err := st.CreateDeletionJob(testsvc.Context(t, time.Minute), upper, src.names, time.Now())
		require.NoError(t, err)
		run(t, st, src, nil)
		done := waitFor(t, st, upper, completed, "job completes")
		require.True(t, done.Verified)
		require.Equal(t, []string{lower}, d.tenantsSeen(), "every plugin call used the canonical id")
		require.Equal(t, map[string]int64{"k": 0}, d.left(lower))
		require.Equal(t, map[string]int64{"k": 7}, d.left(upper), "another string is another tenant's data")
	})
}

// TestJobWhoseIDNoLongerFitsTheFormatCallsNoPlugin: the format changed
// since the job was stored; the job waits, and nothing is called.
func TestJobWhoseIDNoLongerFitsTheFormatCallsNoPlugin(t *testing.T) {
	st := storetest.Open(t, migrations.SQLite)
	d := tables("acme", map[string]int64{"k": 3})
	src := configured("redis:sessions", d)
	_, _, err := st.CreateDeletionJob(testsvc.Context(t, time.Minute), "acme", src.names, time.Now())
	require.NoError(t, err)
	run(t, st, src, nil)
	job := waitFor(t, st, "acme", func(j *deletion.Job) bool { return j.Status == deletion.JobPartial }, "attempt refused")
	require.False(t, job.Verified)
	require.Contains(t, job.LastError, "tenant_id_format")
	require.Empty(t, d.tenantsSeen())
}

// TestDeleterAddedDuringTheJobJoinsIt: a deleter configured (reload) while
// the job is active holds the tenant's data too; the job is not verified
// until it ran and counted 0. A new deleter is a change of the job's plan:
// the job stops for approval (deleting nothing) and runs with it once the
// new plan is approved.
func TestDeleterAddedDuringTheJobJoinsIt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, st store.Store) {
		a := tables(tenant, map[string]int64{"t": 2})
		a.failAfter = 1
		b := tables(tenant, map[string]int64{"k": 5}, "other", map[string]int64{"k": 1})
		src := configured("a", a)
		svc := run(t, st, src, nil)
		_, _, err := svc.StartDeletion(testsvc.Context(t, time.Minute), tenant, deletion.StartOptions{})
		require.NoError(t, err)
		waitFor(t, st, tenant, func(j *deletion.Job) bool { return j.Status == deletion.JobPartial }, "first attempt fails")

		src.mu.Lock()
		src.names = append(src.names, "b")
		src.byName["b"] = b
		src.mu.Unlock()
		a.set(func(d *tableDeleter) { d.failAfter = 0 })
		waiting := waitFor(t, st, tenant, func(j *deletion.Job) bool { return j.Status == deletion.JobAwaitingApproval }, "plan changed")
		require.Contains(t, waiting.PlanDrift, "deleter b is new")
		require.Equal(t, map[string]int64{"k": 5}, b.left(tenant), "nothing deleted before the approval")
		plan, err := svc.Plan(testsvc.Context(t, time.Minute), tenant)
		require.NoError(t, err)
		_, err = svc.Approve(testsvc.Context(t, time.Minute), tenant, deletion.ApproveOptions{PlanHash: plan.Hash})
		require.NoError(t, err)
		done := waitFor(t, st, tenant, completed, "job completes")
		require.True(t, done.Verified)
		j := adminapi.JobBody(done)
		require.EqualValues(t, 5, j.Report.Succeeded["b"].DeletedCount)
		require.Contains(t, j.Report.Verification, "b")
		require.Equal(t, map[string]int64{"k": 0}, b.left(tenant))
		require.Equal(t, map[string]int64{"k": 1}, b.left("other"))
	})
}

// TestVerificationThatCannotCountIsNotVerified: the store answers the
// delete but not the count after it; the job must not say verified.
func TestVerificationThatCannotCountIsNotVerified(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, st store.Store) {
		d := tables(tenant, map[string]int64{"t": 3})
		down := errors.New("count: connection refused")
		d.countErr = func(call int) error {
			if call >= 2 { // the first count is before the delete
				return sdk.Retryable(down, 0)
			}
			return nil
		}
		steady := tables(tenant, map[string]int64{"u": 1})
		svc := run(t, st, configured("flaky", d, "steady", steady), nil)
		_, _, err := svc.StartDeletion(testsvc.Context(t, time.Minute), tenant, deletion.StartOptions{})
		require.NoError(t, err)
		partial := waitFor(t, st, tenant, func(j *deletion.Job) bool { return j.Status == deletion.JobPartial }, "verification fails")
		require.False(t, partial.Verified)
		require.Contains(t, partial.LastError, "flaky could not verify")
		pj := adminapi.JobBody(partial)
		require.Contains(t, pj.Report.Verification, "steady")
		require.NotContains(t, pj.Report.Verification, "flaky", "no count, no verification")

		d.set(func(d *tableDeleter) { d.countErr = nil })
		done := waitFor(t, st, tenant, completed, "job completes once the store counts again")
		require.True(t, done.Verified)
		require.Contains(t, adminapi.JobBody(done).Report.Verification, "flaky")
	})
}

// TestSucceededDeleterNoLongerConfiguredIsNotVerified: a deleter that ran
// in an earlier attempt and was then removed from the config cannot be
// counted, so the job cannot be verified.
func TestSucceededDeleterNoLongerConfiguredIsNotVerified(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, st store.Store) {
		a := tables(tenant, map[string]int64{"t": 2})
		job, _, err := st.CreateDeletionJob(ctx, tenant, []string{"a", "gone"}, time.Now())
		require.NoError(t, err)
		now := time.Now()
		_, err = st.ClaimDeletionJob(ctx, "dead", now, now.Add(200*time.Millisecond), 0)
		require.NoError(t, err)
		require.NoError(t, st.SetDeleterState(ctx, job.ID, "dead", deletion.DeleterState{Name: "gone", Status: deletion.DeleterSucceeded,
			DeletedCount: 4, Total: 4, Attempts: 1, UpdatedAt: now}))
		run(t, st, configured("a", a), nil)
		partial := waitFor(t, st, tenant, func(j *deletion.Job) bool { return j.Status == deletion.JobPartial && j.Attempts >= 2 }, "two attempts")
		require.False(t, partial.Verified)
		require.Contains(t, partial.LastError, "gone could not verify")
		require.Equal(t, map[string]int64{"t": 0}, a.left(tenant))
	})
}

// TestCountThatDisagreesWithItsBreakdownIsNotVerified: a count of 0 whose
// breakdown shows items is not a zero.
func TestCountThatDisagreesWithItsBreakdownIsNotVerified(t *testing.T) {
	st := storetest.Open(t, migrations.SQLite)
	d := tables(tenant, map[string]int64{"t": 3})
	d.lieAfterDelete = true
	svc := run(t, st, configured("liar", d), nil)
	_, _, err := svc.StartDeletion(testsvc.Context(t, time.Minute), tenant, deletion.StartOptions{})
	require.NoError(t, err)
	partial := waitFor(t, st, tenant, func(j *deletion.Job) bool { return j.Status == deletion.JobPartial }, "verification refuses")
	require.False(t, partial.Verified)
	require.Regexp(t, `liar has [12] left`, partial.LastError)
	v := adminapi.JobBody(partial).Report.Verification["liar"]
	require.Zero(t, v.Count, "what the plugin said")
	require.Positive(t, v.Breakdown["t"], "what its breakdown showed")
}
