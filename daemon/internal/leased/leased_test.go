package leased

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

var (
	errCancelled = errors.New("cancelled")
	errShutdown  = errors.New("shutting down")
)

// blockingRun is a run that reports its context and waits until it ends.
func blockingRun(started chan<- context.Context) func(context.Context, context.CancelCauseFunc) {
	return func(ctx context.Context, _ context.CancelCauseFunc) {
		started <- ctx
		<-ctx.Done()
	}
}

func TestRunsTakeNothingUntilOpened(t *testing.T) {
	var r Runs[string]
	require.Equal(t, Closed, r.Start(uuid.New(), "", func(context.Context, context.CancelCauseFunc) { t.Fatal("ran") }, nil))
	require.NoError(t, r.Close(context.Background(), errShutdown), "closing a set never opened")
}

func TestOneRunPerIDAndEachStoppedWithItsCause(t *testing.T) {
	var r Runs[string]
	r.Open(context.Background())
	started := make(chan context.Context, 3)
	a, b := uuid.New(), uuid.New()
	var doneA atomic.Int32
	require.Equal(t, Begun, r.Start(a, "tenant-a", blockingRun(started), func() { doneA.Add(1) }))
	ctxA := <-started
	require.Equal(t, AlreadyRunning, r.Start(a, "tenant-a", func(context.Context, context.CancelCauseFunc) { t.Fatal("a second run of a") }, nil))
	require.Equal(t, Begun, r.Start(b, "tenant-b", blockingRun(started), nil))
	ctxB := <-started
	require.Equal(t, 2, r.Len())

	r.Stop(a, errCancelled)
	<-ctxA.Done()
	require.ErrorIs(t, context.Cause(ctxA), errCancelled)
	require.Eventually(t, func() bool { return doneA.Load() == 1 }, 5*time.Second, time.Millisecond, "done is called after the run returned")
	require.Equal(t, 1, r.Len(), "a left the set before done was called")
	require.NoError(t, ctxB.Err(), "b runs on")

	// a may run again once its run returned.
	require.Equal(t, Begun, r.Start(a, "tenant-a", blockingRun(started), nil))
	ctxA = <-started
	r.StopWhere(func(_ uuid.UUID, tenant string) bool { return tenant == "tenant-b" }, errCancelled)
	<-ctxB.Done()
	require.NoError(t, ctxA.Err(), "only the matching run is stopped")

	require.NoError(t, r.Close(context.Background(), errShutdown))
	require.ErrorIs(t, context.Cause(ctxA), errShutdown)
	require.Zero(t, r.Len())
}

func TestCloseWaitsForEveryRunAndRefusesNewOnes(t *testing.T) {
	var r Runs[struct{}]
	r.Open(context.Background())
	release := make(chan struct{})
	var returned atomic.Bool
	require.Equal(t, Begun, r.Start(uuid.New(), struct{}{}, func(ctx context.Context, _ context.CancelCauseFunc) {
		<-ctx.Done()
		<-release // records its end after the stop
		returned.Store(true)
	}, nil))

	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, r.Close(short, errShutdown), context.DeadlineExceeded, "a run still recording keeps Close waiting until its context ends")
	require.Equal(t, Closed, r.Start(uuid.New(), struct{}{}, func(context.Context, context.CancelCauseFunc) { t.Fatal("ran after Close") }, nil))

	close(release)
	require.NoError(t, r.Close(context.Background(), errShutdown))
	require.True(t, returned.Load(), "Close returned after the run did")

	// A set closed for a stop takes runs again when opened again.
	r.Open(context.Background())
	ran := make(chan struct{})
	require.Equal(t, Begun, r.Start(uuid.New(), struct{}{}, func(context.Context, context.CancelCauseFunc) { close(ran) }, nil))
	<-ran
	require.NoError(t, r.Close(context.Background(), errShutdown))
}

func TestARunsContextOutlivesTheCancelOfOpensContext(t *testing.T) {
	var r Runs[int]
	ctx, cancel := context.WithCancel(context.Background())
	r.Open(ctx)
	cancel()
	started := make(chan context.Context, 1)
	require.Equal(t, Begun, r.Start(uuid.New(), 0, blockingRun(started), nil))
	runCtx := <-started
	require.NoError(t, runCtx.Err(), "only a stop or Close ends a run")
	require.NoError(t, r.Close(context.Background(), errShutdown))
}

func TestARunStopsItself(t *testing.T) {
	var r Runs[int]
	r.Open(context.Background())
	got := make(chan error, 1)
	require.Equal(t, Begun, r.Start(uuid.New(), 0, func(ctx context.Context, stop context.CancelCauseFunc) {
		stop(errCancelled) // as a heartbeat does on a lost lease
		<-ctx.Done()
		got <- context.Cause(ctx)
	}, nil))
	require.ErrorIs(t, <-got, errCancelled)
	require.NoError(t, r.Close(context.Background(), errShutdown))
}

func TestHeartbeatOutlivesTheRunsStopAndEndWaitsForIt(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	beats := make(chan struct{}, 100)
	var inBeat, returned atomic.Bool
	end := Heartbeat(ctx, func(life context.Context) {
		defer returned.Store(true)
		for {
			select {
			case <-life.Done():
				// A renewal under way when the run ends is waited for.
				inBeat.Store(true)
				time.Sleep(100 * time.Millisecond)
				return
			case <-time.After(time.Millisecond):
				beats <- struct{}{}
			}
		}
	})
	<-beats
	stop()
	for i := 0; i < 3; i++ {
		<-beats // still beating after the run's context was cancelled
	}
	end()
	require.True(t, inBeat.Load())
	require.True(t, returned.Load(), "end returned after the heartbeat did")
}

func TestClaimContextIsNotCutShortByAStop(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	claimCtx, cancel := ClaimContext(ctx)
	defer cancel()
	stop()
	require.NoError(t, claimCtx.Err())
	deadline, ok := claimCtx.Deadline()
	require.True(t, ok)
	require.WithinDuration(t, time.Now().Add(ClaimTimeout), deadline, 5*time.Second)
}
