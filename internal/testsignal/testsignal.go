// Package testsignal lets a test wait until production code has reached a
// point (a poll, a page at the store, a lease found lost) instead of
// sleeping for a while and hoping it has: a sleep is too short on a loaded
// machine and too long everywhere else. Modelled on River's
// rivershared/testsignal.
//
// A Signal is off until a test calls Init, and an off Signal costs a nil
// check: production code signals unconditionally. Signalling never blocks
// nor drops a value (the values queue until the test takes them), so a
// test that stops listening cannot stall the code under test, and a test
// that listens late still sees what it missed.
package testsignal

import (
	"sync"
	"time"
)

// Timeout bounds every wait: a signal that does not come means the code
// under test did not get there, and the test fails saying what it waited
// for rather than hanging until the test binary's deadline.
const Timeout = 30 * time.Second

// TB is what a wait needs of testing.TB; production code that signals
// does not import package testing.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Signal carries values of type T from the code under test to one waiting
// test. The zero value is off.
type Signal[T any] struct {
	q *queue[T]
}

type queue[T any] struct {
	mu   sync.Mutex
	vals []T
	// grew has a token when vals grew since the waiter last looked.
	grew chan struct{}
}

// Init turns s on. Call it before the code under test can signal (before
// it starts its goroutines): Signal reads the switch without a lock.
func (s *Signal[T]) Init() {
	s.q = &queue[T]{grew: make(chan struct{}, 1)}
}

// Signal queues v for the test, if s is on.
func (s *Signal[T]) Signal(v T) {
	if s.q == nil {
		return
	}
	s.q.mu.Lock()
	s.q.vals = append(s.q.vals, v)
	s.q.mu.Unlock()
	select {
	case s.q.grew <- struct{}{}:
	default:
	}
}

// Drain forgets the values signalled so far: the next wait sees only
// what comes after this call.
func (s *Signal[T]) Drain() {
	if s.q == nil {
		return
	}
	s.q.mu.Lock()
	s.q.vals = nil
	s.q.mu.Unlock()
}

// Wait takes the oldest value not taken yet, waiting for one if there is
// none; what says what the test waits for, when it comes to nothing.
func (s *Signal[T]) Wait(tb TB, what string) T {
	tb.Helper()
	return s.within(tb, Timeout, what, func(T) bool { return true })
}

// WaitFor takes values, oldest first, until one that match accepts,
// which it returns; the others are gone.
func (s *Signal[T]) WaitFor(tb TB, what string, match func(T) bool) T {
	tb.Helper()
	return s.within(tb, Timeout, what, match)
}

func (s *Signal[T]) within(tb TB, d time.Duration, what string, match func(T) bool) T {
	tb.Helper()
	if s.q == nil {
		tb.Fatalf("testsignal: waiting for %s on a signal that was never turned on (Init)", what)
		var zero T
		return zero
	}
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		if v, ok := s.take(match); ok {
			return v
		}
		select {
		case <-s.q.grew:
		case <-deadline.C:
			tb.Fatalf("testsignal: %s: no signal within %s", what, d)
			var zero T
			return zero
		}
	}
}

// take removes the values up to the first that match accepts, and
// returns it.
func (s *Signal[T]) take(match func(T) bool) (T, bool) {
	s.q.mu.Lock()
	defer s.q.mu.Unlock()
	for i, v := range s.q.vals {
		if match(v) {
			s.q.vals = s.q.vals[i+1:]
			return v, true
		}
	}
	s.q.vals = nil
	var zero T
	return zero, false
}
