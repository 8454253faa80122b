package periodic

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// recorder is a Pass whose every run the test sees and answers: each pass
// announces itself on started and returns what the test sends on answer
// (or the outcome when ctx ends first).
type recorder struct {
	started chan context.Context
	answer  chan result
}

type result struct {
	outcome Outcome
	err     error
}

func newRecorder() *recorder {
	return &recorder{started: make(chan context.Context), answer: make(chan result)}
}

func (r *recorder) pass(ctx context.Context) (Outcome, error) {
	r.started <- ctx
	select {
	case res := <-r.answer:
		return res.outcome, res.err
	case <-ctx.Done():
		return Done, ctx.Err()
	}
}

// next waits for the next pass to start.
func (r *recorder) next(t *testing.T) context.Context {
	t.Helper()
	select {
	case ctx := <-r.started:
		return ctx
	case <-time.After(10 * time.Second):
		t.Fatal("no pass started")
		return nil
	}
}

// none checks that no pass starts within d.
func (r *recorder) none(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-r.started:
		t.Fatal("a pass started; want none")
	case <-time.After(d):
	}
}

type fixture struct {
	rec  *recorder
	loop *Loop
	reg  *prometheus.Registry
	logs *testsvc.SyncBuffer
}

// setup starts a loop named "job" around a recorder; edit adjusts the
// config first. The loop is stopped when the test ends.
func setup(t *testing.T, edit func(*Config)) *fixture {
	t.Helper()
	f := &fixture{rec: newRecorder(), reg: prometheus.NewRegistry(), logs: &testsvc.SyncBuffer{}}
	cfg := Config{
		Name: "test", Job: "job", Interval: func() time.Duration { return time.Hour },
		Pass: f.rec.pass, Metrics: New(f.reg),
		Log: hclog.New(&hclog.LoggerOptions{Output: f.logs, Level: hclog.Debug}),
	}
	if edit != nil {
		edit(&cfg)
	}
	f.loop = NewLoop(cfg)
	require.NoError(t, f.loop.Start(testsvc.Context(t, 10*time.Second)))
	t.Cleanup(func() {
		// Let a pass blocked on its answer see the cancel.
		go func() {
			for range f.rec.started {
			}
		}()
		require.NoError(t, f.loop.Stop(testsvc.Context(t, 10*time.Second)))
		close(f.rec.started)
	})
	return f
}

func (f *fixture) answer(o Outcome, err error) { f.rec.answer <- result{o, err} }

// gauge reads the gauge name{job="job"}; ok is false when it has no value.
func (f *fixture) gauge(t *testing.T, name string) (v float64, ok bool) {
	t.Helper()
	families, err := f.reg.Gather()
	require.NoError(t, err)
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "job" && l.GetValue() == "job" {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

const (
	lastSuccess = "lifecycled_periodic_last_success_timestamp_seconds"
	intervalSec = "lifecycled_periodic_interval_seconds"
)

func (f *fixture) noSuccess(t *testing.T) {
	t.Helper()
	_, ok := f.gauge(t, lastSuccess)
	require.False(t, ok, "no success recorded")
}

// step is one move of a scripted loop test.
type step func(t *testing.T, f *fixture)

var (
	next = func(t *testing.T, f *fixture) { f.rec.next(t) }
	kick = func(_ *testing.T, f *fixture) { f.loop.Kick() }
	none = func(t *testing.T, f *fixture) { f.rec.none(t, 100*time.Millisecond) }
)

func answer(o Outcome, err error) step {
	return func(_ *testing.T, f *fixture) { f.answer(o, err) }
}

// TestLoopSchedulesPasses scripts when passes start: the interval is an
// hour unless a case says otherwise, so a pass that starts came from the
// start, a kick or a More.
func TestLoopSchedulesPasses(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		interval time.Duration
		steps    []step
	}{
		"a pass at start, then the interval": {steps: []step{next, answer(Done, nil), none}},
		"a pass after each interval": {interval: 20 * time.Millisecond,
			steps: []step{next, answer(Done, nil), next, answer(Done, nil), next, answer(Done, nil)}},
		"a kick starts the next pass now":        {steps: []step{next, answer(Done, nil), kick, next, answer(Done, nil), none}},
		"kicks during a pass make one more pass": {steps: []step{next, kick, kick, kick, answer(Done, nil), next, answer(Done, nil), none}},
		"More runs again at once":                {steps: []step{next, answer(More, nil), next, answer(Done, nil), none}},
		"a failed More waits":                    {steps: []step{next, answer(More, errors.New("boom")), none}},
		"Skipped waits":                          {steps: []step{next, answer(Skipped, nil), none}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, func(c *Config) {
				if tc.interval > 0 {
					c.Interval = func() time.Duration { return tc.interval }
				}
			})
			for _, s := range tc.steps {
				s(t, f)
			}
		})
	}
}

func TestLoopFirstDelay(t *testing.T) {
	t.Parallel()
	start := time.Now()
	f := setup(t, func(c *Config) { c.FirstDelay = 200 * time.Millisecond })
	f.rec.next(t)
	require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)
	f.answer(Done, nil)
}

func TestLoopRecordsSuccessOnlyForSucceededPasses(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *Config) { c.Interval = func() time.Duration { return 42 * time.Second } })
	f.rec.next(t)
	f.answer(Skipped, nil)
	f.loop.Kick()
	f.rec.next(t)
	f.answer(Done, errors.New("boom"))
	f.loop.Kick()
	f.rec.next(t)
	f.noSuccess(t)
	before := float64(time.Now().Unix())
	f.answer(Done, nil)
	f.loop.Kick()
	f.rec.next(t) // the previous pass is fully recorded
	last, _ := f.gauge(t, lastSuccess)
	require.GreaterOrEqual(t, last, before)
	interval, _ := f.gauge(t, intervalSec)
	require.Equal(t, 42.0, interval)
	f.answer(Done, nil)
}

func TestLoopWithoutJobRecordsNoSuccess(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *Config) { c.Job = "" })
	f.rec.next(t)
	f.answer(Done, nil)
	f.loop.Kick()
	f.rec.next(t)
	f.noSuccess(t)
	f.answer(Done, nil)
}

func TestLoopLogsFailuresButNotCancellation(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	f.rec.next(t)
	f.answer(Done, errors.New("store is down"))
	f.loop.Kick()
	f.rec.next(t)
	f.answer(Done, context.Canceled) // a cancelled call inside the pass
	f.loop.Kick()
	f.rec.next(t)
	f.answer(Done, nil)
	require.NoError(t, f.loop.Stop(testsvc.Context(t, 10*time.Second)))
	logs := f.logs.String()
	require.Equal(t, 1, strings.Count(logs, "test pass failed"), logs)
	require.Contains(t, logs, "store is down")
}

func TestLoopStopDuringAPassCancelsItAndWaits(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	ctx := f.rec.next(t)
	require.NoError(t, f.loop.Stop(testsvc.Context(t, 10*time.Second)))
	require.ErrorIs(t, ctx.Err(), context.Canceled, "the pass was cancelled before Stop returned")
	require.NotContains(t, f.logs.String(), "pass failed", "a stop is not a failure")
	f.noSuccess(t)
}

// A pass cut short by a stop may fail with anything (a driver's "conn
// closed"): while the loop is stopping, that is not logged.
func TestLoopAnyErrorOfAStoppingPassIsNotLogged(t *testing.T) {
	t.Parallel()
	logs := &testsvc.SyncBuffer{}
	started := make(chan struct{})
	loop := NewLoop(Config{Name: "test", Interval: func() time.Duration { return time.Hour },
		Log: hclog.New(&hclog.LoggerOptions{Output: logs}),
		Pass: func(ctx context.Context) (Outcome, error) {
			close(started)
			<-ctx.Done()
			return Done, errors.New("driver: conn closed")
		}})
	require.NoError(t, loop.Start(testsvc.Context(t, 10*time.Second)))
	<-started
	require.NoError(t, loop.Stop(testsvc.Context(t, 10*time.Second)))
	require.Empty(t, logs.String())
}

func TestLoopStopGivesUpWithItsContext(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	release := make(chan struct{})
	loop := NewLoop(Config{Name: "test", Interval: func() time.Duration { return time.Hour },
		Pass: func(ctx context.Context) (Outcome, error) {
			rec.started <- ctx
			<-release // ignores cancellation
			return Done, nil
		}})
	require.NoError(t, loop.Start(testsvc.Context(t, 10*time.Second)))
	rec.next(t)
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, loop.Stop(short), context.DeadlineExceeded)
	close(release)
	require.NoError(t, loop.Stop(testsvc.Context(t, 10*time.Second)), "a second stop waits for the end")
}

func TestLoopDoubleStopAndStopBeforeStart(t *testing.T) {
	t.Parallel()
	ctx := testsvc.Context(t, 10*time.Second)
	passes := make(chan struct{}, 10)
	loop := NewLoop(Config{Interval: func() time.Duration { return time.Hour },
		Pass: func(context.Context) (Outcome, error) { passes <- struct{}{}; return Done, nil }})
	require.NoError(t, loop.Stop(ctx), "never started")
	require.NoError(t, loop.Start(ctx))
	<-passes
	require.NoError(t, loop.Stop(ctx))
	require.NoError(t, loop.Stop(ctx))

	var wg sync.WaitGroup
	require.NoError(t, loop.Start(ctx))
	select {
	case <-passes:
	case <-ctx.Done():
		t.Fatal("a stopped loop did not start again")
	}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			require.NoError(t, loop.Stop(ctx))
		}()
	}
	wg.Wait()
}

func TestLoopStartTwiceRunsOneLoop(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	require.NoError(t, f.loop.Start(testsvc.Context(t, 10*time.Second)))
	f.rec.next(t)
	f.answer(Done, nil)
	f.rec.none(t, 100*time.Millisecond)
}

func TestLoopOutlivesItsStartContext(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	loop := NewLoop(Config{Interval: func() time.Duration { return time.Hour }, Pass: rec.pass})
	start, cancel := context.WithCancel(testsvc.Context(t, 10*time.Second))
	require.NoError(t, loop.Start(start))
	cancel()
	ctx := rec.next(t)
	require.NoError(t, ctx.Err())
	go func() {
		for range rec.started {
		}
	}()
	require.NoError(t, loop.Stop(testsvc.Context(t, 10*time.Second)))
	close(rec.started)
}

func TestLoopPassTimeout(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *Config) { c.Timeout = func() time.Duration { return 50 * time.Millisecond } })
	ctx := f.rec.next(t)
	deadline, ok := ctx.Deadline()
	require.True(t, ok, "the pass has a deadline")
	require.WithinDuration(t, time.Now().Add(50*time.Millisecond), deadline, 50*time.Millisecond)
	// The recorder returns ctx.Err() when the pass times out: a timeout is
	// a failure, logged, with no success.
	testsvc.Eventually(t, 10*time.Second, func() bool { return strings.Contains(f.logs.String(), "test pass failed") },
		"a timed-out pass is logged")
	require.Contains(t, f.logs.String(), context.DeadlineExceeded.Error())
	f.noSuccess(t)
}

func TestLoopWithoutTimeoutHasNoDeadline(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *Config) { c.Timeout = func() time.Duration { return 0 } })
	ctx := f.rec.next(t)
	_, ok := ctx.Deadline()
	require.False(t, ok)
	f.answer(Done, nil)
}
