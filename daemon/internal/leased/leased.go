// Package leased runs the work a daemon holds under a lease in the state
// store: erasure jobs (deletion) and bulk dead-letter operations (dlq).
// Both keep one run per leased item on a daemon, stop a run with a cause
// (a cancel, a hold, a lost lease), stop them all at shutdown and wait
// until each has recorded its end, renew the lease from a heartbeat that
// outlives the run's stop, and claim new work with a call that a stop
// does not cut short. What is leased, and how a lease is renewed, stays
// with each runner.
package leased

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Runs is the set of runs under way on one daemon, keyed by the id of the
// leased item; T is what the runner keeps of each (the tenant of a job, so
// that a hold stops its erasure). The zero value takes no runs until Open.
type Runs[T any] struct {
	mu      sync.Mutex
	active  map[uuid.UUID]*run[T]
	base    context.Context
	stopAll context.CancelCauseFunc
	// unfinished holds the runs whose goroutine has not ended: a run
	// leaves active before its done is called (done may start the id
	// again), and Close waits for done too.
	unfinished map[*run[T]]struct{}
}

type run[T any] struct {
	tag      T
	stop     context.CancelCauseFunc
	finished chan struct{}
}

// Started is what Start did.
type Started int

const (
	// Begun: the run was started.
	Begun Started = iota
	// AlreadyRunning: the id runs here already, and that run goes on. A
	// claim may take again an item whose lease lapsed under a run of this
	// daemon that still works on it; a second run would do its work twice.
	AlreadyRunning
	// Closed: the set takes no runs (never opened, or closed for a stop).
	Closed
)

// Open makes the set take runs. Their contexts outlive ctx's cancel: a run
// ends by its own stop or by Close. Opening an open set changes nothing.
func (r *Runs[T]) Open(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopAll == nil {
		r.base, r.stopAll = context.WithCancelCause(context.WithoutCancel(ctx))
	}
	if r.active == nil {
		r.active, r.unfinished = map[uuid.UUID]*run[T]{}, map[*run[T]]struct{}{}
	}
}

// Start runs fn in its own goroutine for the item id, with a context that
// ends, with its cause, when the run is stopped (Stop, StopWhere, the stop
// function fn is given) or the set is closed. After fn returns, id leaves
// the set and then done (if not nil) is called.
func (r *Runs[T]) Start(id uuid.UUID, tag T, fn func(ctx context.Context, stop context.CancelCauseFunc), done func()) Started {
	r.mu.Lock()
	if r.stopAll == nil || r.base.Err() != nil {
		r.mu.Unlock()
		return Closed
	}
	if r.active[id] != nil {
		r.mu.Unlock()
		return AlreadyRunning
	}
	ctx, stop := context.WithCancelCause(r.base)
	a := &run[T]{tag: tag, stop: stop, finished: make(chan struct{})}
	r.active[id] = a
	r.unfinished[a] = struct{}{}
	r.mu.Unlock()
	go func() {
		defer func() {
			r.mu.Lock()
			delete(r.unfinished, a)
			r.mu.Unlock()
			close(a.finished)
		}()
		defer func() {
			r.mu.Lock()
			delete(r.active, id)
			r.mu.Unlock()
			stop(nil)
			if done != nil {
				done()
			}
		}()
		fn(ctx, stop)
	}()
	return Begun
}

// Len is how many runs are under way.
func (r *Runs[T]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.active)
}

// Stop stops the run of id, if one is under way, with cause.
func (r *Runs[T]) Stop(id uuid.UUID, cause error) {
	r.StopWhere(func(runID uuid.UUID, _ T) bool { return runID == id }, cause)
}

// StopWhere stops, with cause, every run under way that match reports.
func (r *Runs[T]) StopWhere(match func(id uuid.UUID, tag T) bool, cause error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, a := range r.active {
		if match(id, a.tag) {
			a.stop(cause)
		}
	}
}

// Close stops every run with cause, takes no new ones until the next Open,
// and waits until each run has returned or ctx ends (ctx's error then).
func (r *Runs[T]) Close(ctx context.Context, cause error) error {
	r.mu.Lock()
	stopAll := r.stopAll
	r.stopAll = nil
	var waits []chan struct{}
	for a := range r.unfinished {
		waits = append(waits, a.finished)
	}
	r.mu.Unlock()
	if stopAll != nil {
		stopAll(cause)
	}
	for _, finished := range waits {
		select {
		case <-finished:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Heartbeat runs beat in its own goroutine until the returned end is
// called; end waits until beat has returned. beat's context outlives the
// cancel of ctx: a stopped run still records its end under its lease.
// A run calls end before it returns, because once the runner's Stop
// returns the daemon closes the store, and a renewal still under way would
// use it closed.
func Heartbeat(ctx context.Context, beat func(life context.Context)) (end func()) {
	life, endLife := context.WithCancel(context.WithoutCancel(ctx))
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		beat(life)
	}()
	return func() {
		endLife()
		<-beating
	}
}

// ClaimTimeout bounds a claim of new work.
const ClaimTimeout = 30 * time.Second

// ClaimContext is the context of a claim of new work made in a runner's
// pass: ctx without its cancel, bounded by ClaimTimeout. A stop must not
// cut a claim short: a statement already sent may still run at the
// database after its caller gave up, and the item would then be held by a
// daemon that never learnt of it, with no run until its lease ran out.
// The pass runs to its end before the runner's Stop goes on, so what a
// claim takes is run, and handed back by the stop like the rest.
func ClaimContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), ClaimTimeout)
}
