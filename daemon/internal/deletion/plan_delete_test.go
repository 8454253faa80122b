package deletion_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/adminapi"
	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// TestDeleteGetsTheFingerprintTheGateChecked: each Delete carries the
// fingerprint of the deleter's part of the plan that the attempt's gate
// checked; a deleter that cannot plan gets none.
func TestDeleteGetsTheFingerprintTheGateChecked(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, st store.Store) {
		pg := tables(tenant, map[string]int64{"public.orders": 3})
		pg.fingerprint = "sha256:aa"
		kv := tables(tenant, map[string]int64{"session:{tenant}:*": 2})
		svc := run(t, st, configured("postgres:app", pg, "redis:sessions", kv), nil)
		_, _, err := svc.StartDeletion(testsvc.Context(t, time.Minute), tenant, deletion.StartOptions{})
		require.NoError(t, err)
		done := waitFor(t, st, tenant, completed, "job completes")
		require.True(t, done.Verified)
		require.Equal(t, []string{"sha256:aa"}, pg.fingerprintsSeen())
		require.Equal(t, []string{""}, kv.fingerprintsSeen())
	})
}

// TestStoreChangedAfterThePlanCheckIsNotDeleted: the store changes after
// the attempt's plan check but before Delete (the gate cannot see it).
// The deleter refuses the checked fingerprint, deleting nothing; the
// deleter is BLOCKED with the plugin's words; an operator's retry checks
// the plan again, which now differs, so the job waits for approval, and
// runs once the new plan is approved.
func TestStoreChangedAfterThePlanCheckIsNotDeleted(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, st store.Store) {
		pg := tables(tenant, map[string]int64{"public.orders": 3}, "other", map[string]int64{"public.orders": 4})
		pg.fingerprint = "sha256:aa"
		plans := 0
		pg.afterPlan = func(d *tableDeleter) {
			// 1: the plan the job is created with; 2: the attempt's check.
			if plans++; plans == 2 {
				d.fingerprint = "sha256:bb"
			}
		}
		kv := tables(tenant, map[string]int64{"session:{tenant}:*": 2})
		svc := run(t, st, configured("postgres:app", pg, "redis:sessions", kv), nil)
		_, _, err := svc.StartDeletion(testsvc.Context(t, time.Minute), tenant, deletion.StartOptions{})
		require.NoError(t, err)

		blocked := waitFor(t, st, tenant, func(j *deletion.Job) bool { return j.Status == deletion.JobBlocked }, "the deleter refuses the stale plan")
		require.Equal(t, map[string]int64{"public.orders": 3}, pg.left(tenant), "nothing deleted")
		require.Equal(t, map[string]int64{"public.orders": 4}, pg.left("other"))
		d := deleterJSON(adminapi.JobBody(blocked), "postgres:app")
		require.Equal(t, deletion.DeleterBlocked, d.Status)
		require.Contains(t, d.Error, "the plan changed between the daemon's plan check and Delete")
		require.Equal(t, []string{"sha256:aa"}, pg.fingerprintsSeen())

		_, err = svc.Retry(testsvc.Context(t, time.Minute), tenant)
		require.NoError(t, err)
		waiting := waitFor(t, st, tenant, func(j *deletion.Job) bool { return j.Status == deletion.JobAwaitingApproval }, "the retry's plan check sees the change")
		require.Contains(t, waiting.PlanDrift, "postgres:app")
		require.Equal(t, map[string]int64{"public.orders": 3}, pg.left(tenant), "nothing deleted before the approval")

		plan, err := svc.Plan(testsvc.Context(t, time.Minute), tenant)
		require.NoError(t, err)
		_, err = svc.Approve(testsvc.Context(t, time.Minute), tenant, deletion.ApproveOptions{PlanHash: plan.Hash})
		require.NoError(t, err)
		done := waitFor(t, st, tenant, completed, "job completes")
		require.True(t, done.Verified)
		require.Equal(t, map[string]int64{"public.orders": 0}, pg.left(tenant))
		require.Equal(t, map[string]int64{"public.orders": 4}, pg.left("other"), "another tenant's items stay")
		require.Equal(t, []string{"sha256:aa", "sha256:bb"}, pg.fingerprintsSeen())
	})
}
