package testsvc

import (
	"context"
	"sync/atomic"
	"time"
)

// Late makes call as a statement already sent to a busy server runs: after
// delay, whether or not its caller gave up meanwhile. It returns call's
// answer, or ctx's error when ctx ends first (call still happens).
func Late[T any](ctx context.Context, delay time.Duration, call func(context.Context) (T, error)) (T, error) {
	type answer struct {
		v   T
		err error
	}
	done := make(chan answer, 1)
	go func() {
		time.Sleep(delay)
		v, err := call(context.Background())
		done <- answer{v, err}
	}()
	select {
	case a := <-done:
		return a.v, a.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// Lingering stands for calls that, like a driver slow to give up, return
// only a while after their context ended; it counts those started and
// those still under way.
type Lingering struct {
	Started, UnderWay atomic.Int32
}

// Call waits for ctx to end, then for 200 ms more, and returns ctx's error.
func (l *Lingering) Call(ctx context.Context) error {
	l.Started.Add(1)
	l.UnderWay.Add(1)
	defer l.UnderWay.Add(-1)
	<-ctx.Done()
	time.Sleep(200 * time.Millisecond)
	return ctx.Err()
}
