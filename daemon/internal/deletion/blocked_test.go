package deletion_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
)

// errBadTable is what a plugin returns when its config no longer fits the
// store (a table renamed away): retrying the same call cannot succeed.
var errBadTable = sdk.InvalidConfig(sdk.FieldError{Field: "tables", Problem: `relation "orders" does not exist`})

// A permanent error blocks its deleter: the job stops retrying it (no
// attempt spent every backoff), the other deleters finish, and only an
// operator's retry, after the cause is fixed, runs it again.
func TestPermanentErrorBlocksTheJobUntilAnOperatorRetries(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, st store.Store) {
		broken := items(10)
		broken.fail, broken.failAt = errBadTable, 3
		steady := items(6)
		src := newMem("postgres:orders", broken, "redis:sessions", steady)
		_, svc := startRunner(t, st, src, "d1")
		_, _, err := svc.StartDeletion(ctx, tenant, deletion.StartOptions{})
		require.NoError(t, err)

		blocked := waitStatus(t, st, deletion.JobBlocked)
		require.Nil(t, blocked.NextAttemptAt, "a blocked job is not due again by itself")
		require.False(t, blocked.Verified)
		require.Contains(t, blocked.LastError, "postgres:orders")
		require.Contains(t, blocked.LastError, "tenant retry")
		states := deleterStates(blocked)
		require.Equal(t, deletion.DeleterBlocked, states["postgres:orders"].Status)
		require.EqualValues(t, 3, states["postgres:orders"].DeletedCount, "what it deleted before failing is kept")
		require.Equal(t, deletion.DeleterSucceeded, states["redis:sessions"].Status)
		report := blocked.ToJSON().Report
		require.Len(t, report.Failed, 1, "a blocked deleter is reported as failed")
		require.Equal(t, "postgres:orders", report.Failed[0].Deleter)
		require.Contains(t, report.Failed[0].Error, `relation "orders" does not exist`)

		// Several backoffs (100 ms, 200 ms, ...) pass: nothing runs again.
		calls := broken.calls.Load()
		time.Sleep(time.Second)
		require.Equal(t, calls, broken.calls.Load(), "a blocked deleter is not retried automatically")
		still, err := st.LatestDeletionJob(ctx, tenant)
		require.NoError(t, err)
		require.Equal(t, deletion.JobBlocked, still.Status)
		require.Equal(t, blocked.Attempts, still.Attempts)

		// A new request returns the blocked job instead of a second one.
		again, created, err := svc.StartDeletion(ctx, tenant, deletion.StartOptions{})
		require.NoError(t, err)
		require.False(t, created)
		require.Equal(t, blocked.ID, again.ID)

		// The operator fixes the cause and retries: the blocked deleter
		// runs again (the one that succeeded does not), and the job ends
		// COMPLETED and verified. The other tenant's items never move.
		broken.mu.Lock()
		broken.fail = nil
		broken.mu.Unlock()
		_, err = svc.Retry(ctx, tenant)
		require.NoError(t, err)
		done := waitStatus(t, st, deletion.JobCompleted)
		require.True(t, done.Verified)
		require.EqualValues(t, 1, steady.calls.Load())
		require.EqualValues(t, 10, deleterStates(done)["postgres:orders"].DeletedCount, "3 before the block and 7 after add up")
		require.EqualValues(t, 9, broken.items["other"])
		require.EqualValues(t, 9, steady.items["other"])
	})
}

// A permanent error of one deleter does not stop the retries of another
// whose store is only down: the job stays PARTIAL (with backoff) until the
// retryable one succeeds, and then is BLOCKED on the permanent one alone.
func TestBlockedDeleterWaitsWhileAnotherIsRetried(t *testing.T) {
	st := storetest.Open(t, "sqlite")
	broken := items(4)
	broken.fail = errBadTable
	flaky := items(8)
	flaky.fail, flaky.failAt = errDown, 2
	src := newMem("postgres:orders", broken, "redis:sessions", flaky)
	_, svc := startRunner(t, st, src, "d1")
	ctx := testsvc.Context(t, time.Minute)
	_, _, err := svc.StartDeletion(ctx, tenant, deletion.StartOptions{})
	require.NoError(t, err)

	partial := waitStatus(t, st, deletion.JobPartial)
	require.NotNil(t, partial.NextAttemptAt)
	require.Contains(t, partial.LastError, "blocked until an operator retries the job")
	require.Equal(t, deletion.DeleterBlocked, deleterStates(partial)["postgres:orders"].Status)

	flaky.mu.Lock()
	flaky.fail = nil
	flaky.mu.Unlock()
	blocked := waitStatus(t, st, deletion.JobBlocked)
	states := deleterStates(blocked)
	require.Equal(t, deletion.DeleterSucceeded, states["redis:sessions"].Status)
	require.EqualValues(t, 8, states["redis:sessions"].DeletedCount)
	require.EqualValues(t, 1, broken.calls.Load(), "the blocked deleter ran once, in the first attempt")
}

// A deleter removed from the config blocks the job (it used to be FAILED
// and retried for ever); configured again and retried, it completes.
func TestRemovedDeleterBlocksTheJob(t *testing.T) {
	st := storetest.Open(t, "sqlite")
	gone := items(5)
	src := newMem("redis:sessions", items(3), "postgres:orders", gone)
	// The job is created while both are configured; the first attempt runs
	// after postgres:orders is removed.
	removable := &switchable{memDeleters: src}
	removable.remove("postgres:orders")
	r, svc := startRunner(t, st, removable, "d1")
	ctx := testsvc.Context(t, time.Minute)
	_, err := st.CreateDeletionJobs(ctx, []deletion.JobRequest{{Tenant: tenant}}, []string{"redis:sessions", "postgres:orders"}, time.Now())
	require.NoError(t, err)
	r.Kick()

	blocked := waitStatus(t, st, deletion.JobBlocked)
	require.Contains(t, deleterStates(blocked)["postgres:orders"].Error, "no longer configured")
	require.Equal(t, deletion.DeleterBlocked, deleterStates(blocked)["postgres:orders"].Status)
	require.EqualValues(t, 0, gone.calls.Load())

	// Retrying while it is still missing blocks the job again.
	_, err = svc.Retry(ctx, tenant)
	require.NoError(t, err)
	testsvc.Eventually(t, 10*time.Second, func() bool {
		j, err := st.LatestDeletionJob(ctx, tenant)
		return err == nil && j.Status == deletion.JobBlocked && j.Attempts > blocked.Attempts
	}, "blocked again")

	removable.restore()
	_, err = svc.Retry(ctx, tenant)
	require.NoError(t, err)
	done := waitStatus(t, st, deletion.JobCompleted)
	require.True(t, done.Verified)
	require.EqualValues(t, 0, gone.items[tenant])
	require.EqualValues(t, 9, gone.items["other"])
}

func TestRetryRefusesJobsThatAreNotBlockedOrPartial(t *testing.T) {
	st := storetest.Open(t, "sqlite")
	src := newMem("redis:sessions", items(3))
	_, svc := startRunner(t, st, src, "d1")
	ctx := testsvc.Context(t, time.Minute)

	_, err := svc.Retry(ctx, tenant)
	require.True(t, errors.Is(err, derrors.ErrNotFound), "%v", err)
	_, _, err = svc.StartDeletion(ctx, tenant, deletion.StartOptions{})
	require.NoError(t, err)
	waitStatus(t, st, deletion.JobCompleted)
	_, err = svc.Retry(ctx, tenant)
	require.True(t, errors.Is(err, derrors.ErrConflict), "%v", err)
	require.Contains(t, err.Error(), "COMPLETED")
	_, err = svc.Retry(ctx, "not-a-uuid")
	require.True(t, errors.Is(err, derrors.ErrInvalid), "%v", err)
}

func deleterStates(j *deletion.Job) map[string]deletion.DeleterState {
	out := map[string]deletion.DeleterState{}
	for _, d := range j.Deleters {
		out[d.Name] = d
	}
	return out
}

// switchable hides deleters from the configured set, as a config reload
// that removed their block would.
type switchable struct {
	*memDeleters
	hidden atomic.Value // string
}

func (s *switchable) remove(name string) { s.hidden.Store(name) }
func (s *switchable) restore()           { s.hidden.Store("") }

func (s *switchable) DeleterNames() []string {
	hidden, _ := s.hidden.Load().(string)
	var out []string
	for _, n := range s.memDeleters.DeleterNames() {
		if n != hidden {
			out = append(out, n)
		}
	}
	return out
}
