package plugintest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lifecycled/lifecycled/sdk"
)

// The cancellation check reads the store at these times after the
// cancelled Delete returned: requests the plugin had in flight may land
// before the first reading, nothing may change after it.
const (
	cancelGrace  = 500 * time.Millisecond
	cancelSettle = 2500 * time.Millisecond
)

// cancellation cancels a long Delete at its first progress report and
// checks, in the store, that the work stopped: gRPC ends the call on the
// caller's side at once, whatever the plugin does, so only the store shows
// a plugin that goes on deleting.
func (k *kit) cancellation(t *testing.T) {
	c := k.o.NewTenantID()
	seeded := k.o.Fixture.Seed(t, c, k.o.CancelSeed)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	var atCancel atomic.Int64 // the progress that triggered the cancel
	cancelledAt := make(chan time.Time, 1)
	done := make(chan error, 1)
	go func() {
		_, err := k.d.Delete(ctx, &sdk.DeleteRequest{TenantID: c}, func(n int64) {
			once.Do(func() {
				atCancel.Store(n)
				cancelledAt <- time.Now()
				cancel()
			})
		})
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * time.Minute):
		t.Fatal("Delete did not return within 5 minutes")
	}
	returned := time.Now()
	var at time.Time
	select {
	case at = <-cancelledAt:
	default:
		// Not a race: the first progress a plugin reports always reaches
		// the caller before the result does.
		t.Fatalf("Delete of %d units returned without reporting progress first: report progress as the work goes, "+
			"or raise CancelSeed above what one batch deletes", k.o.CancelSeed)
	}
	if took := returned.Sub(at); took > 5*time.Second {
		t.Errorf("Delete returned %s after cancellation, want promptly", took)
	}
	time.Sleep(time.Until(returned.Add(cancelGrace)))
	early := k.o.Fixture.Remaining(t, c)
	time.Sleep(time.Until(returned.Add(cancelSettle)))
	late := k.o.Fixture.Remaining(t, c)
	switch {
	case early != late:
		t.Errorf("the plugin went on deleting after its Delete was cancelled: %d of %d items were left %s after the call returned, %d at %s. "+
			"The daemon's call ends at once, so a plugin that ignores ctx keeps deleting while the daemon counts and retries: "+
			"check ctx.Err() before each batch and pass ctx to every store call, and stop within one batch",
			early, seeded, cancelGrace, late, cancelSettle)
	case early == 0 && atCancel.Load() < seeded && err != nil:
		t.Errorf("all %d items were gone %s after a Delete cancelled at its first progress report (%d deleted) returned: "+
			"the plugin went on deleting after cancellation (check ctx.Err() before each batch), or a Delete of CancelSeed items "+
			"takes less than a second (raise CancelSeed)", seeded, cancelGrace, atCancel.Load())
	}
	if err == nil && late != 0 {
		t.Errorf("Delete succeeded after cancellation but %d items remain", late)
	}
	if err != nil {
		if sdk.ClassOf(err) != sdk.ClassRetryable {
			t.Errorf("cancelled Delete error is %v (%s), want retryable", err, sdk.ClassOf(err))
		}
		// After the caller cancels, the plugin's final count cannot reach
		// it; the last progress it saw is a lower bound.
		if deleted, ok := sdk.DeletedBefore(err); ok && deleted+late > seeded {
			t.Errorf("cancelled Delete reported %d deleted, but the store has %d of %d left", deleted, late, seeded)
		}
	}
	// The rest is deleted by the next call.
	resp, err := k.d.Delete(ctxFor(t, 5*time.Minute), &sdk.DeleteRequest{TenantID: c}, nil)
	if err != nil {
		t.Fatalf("Delete after cancellation: %v", err)
	}
	if resp.DeletedCount != late {
		t.Errorf("Delete after cancellation = %d, want the %d remaining", resp.DeletedCount, late)
	}
	if got := k.o.Fixture.Remaining(t, c); got != 0 {
		t.Errorf("%d items remain", got)
	}
	k.w.unchanged(t, "the cancelled Delete and the next one", k.w.ids[0])
}

// outage takes the store away and checks that Count and Delete fail
// retryable, delete nothing, and work again once it is back.
func (k *kit) outage(t *testing.T) {
	so, ok := k.o.Fixture.(StoreOutage)
	if !ok {
		t.Skip("the fixture is not a plugintest.StoreOutage: implement StopStore and StartStore (plugintest.Proxy does it for a TCP store) " +
			"to check that a store that is down gives retryable errors, never a count of 0")
	}
	id := k.o.NewTenantID()
	seeded := k.o.Fixture.Seed(t, id, k.o.Seed)
	before := k.w.take(t, id)
	// Health (sdk.HealthChecker), when the plugin probes its store: ok now,
	// failing while the store is down, ok again once it is back.
	health, probes := sdk.HealthChecker(k.d), true
	switch err := health.Health(ctxFor(t, time.Minute)); {
	case errors.Is(err, sdk.ErrUnsupported):
		probes = false
		t.Log("the plugin does not implement Health: the daemon reports its store as unknown")
	case err != nil:
		t.Errorf("Health with the store up: %v", err)
	}
	so.StopStore(t)
	up := false
	defer func() {
		if !up {
			so.StartStore(t)
		}
	}()
	c, err := k.d.Count(ctxFor(t, 2*time.Minute), &sdk.CountRequest{TenantID: id})
	switch {
	case err == nil:
		t.Errorf("Count returned %d while the store was down: return the failure (sdk.Retryable), or the daemon takes the count for the truth "+
			"and may call a tenant erased whose data is all there", c.Count)
	case sdk.ClassOf(err) != sdk.ClassRetryable:
		t.Errorf("Count while the store was down failed with a %s error: %v; class a store that cannot be reached sdk.Retryable "+
			"(or sdk.Unavailable) so the daemon tries again later", sdk.ClassOf(err), err)
	}
	resp, err := k.d.Delete(ctxFor(t, 2*time.Minute), &sdk.DeleteRequest{TenantID: id}, nil)
	switch {
	case err == nil:
		t.Errorf("Delete succeeded (%d deleted) while the store was down: return the failure wrapped in sdk.PartialDeletion(0, sdk.Retryable(err, 0))", resp.DeletedCount)
	case sdk.ClassOf(err) != sdk.ClassRetryable:
		t.Errorf("Delete while the store was down failed with a %s error: %v; class a store that cannot be reached sdk.Retryable "+
			"so the daemon retries this deleter later", sdk.ClassOf(err), err)
	default:
		if n, ok := sdk.DeletedBefore(err); ok && n != 0 {
			t.Errorf("Delete reported %d deleted while the store was down", n)
		}
	}
	if probes {
		if err := health.Health(ctxFor(t, 2*time.Minute)); err == nil {
			t.Error("Health answered ok while the store was down: probe the store itself (a ping, a metadata call), not the plugin")
		} else if sdk.ClassOf(err) != sdk.ClassRetryable {
			t.Errorf("Health while the store was down failed with a %s error: %v; class it sdk.Unavailable", sdk.ClassOf(err), err)
		}
	}
	so.StartStore(t)
	up = true
	// The plugin must recover without a restart: the daemon keeps it.
	var last error
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := k.d.Count(ctxFor(t, time.Minute), &sdk.CountRequest{TenantID: id})
		if err == nil {
			if c.Count != seeded {
				t.Errorf("Count after the store came back = %d, want %d", c.Count, seeded)
			}
			break
		}
		last = err
		if time.Now().After(deadline) {
			t.Fatalf("Count still fails 30 s after the store came back: %v; drop a broken connection and open a new one "+
				"(the daemon does not restart a plugin for a store outage)", last)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if probes {
		if err := health.Health(ctxFor(t, time.Minute)); err != nil {
			t.Errorf("Health after the store came back (and Count worked): %v", err)
		}
	}
	if now := k.w.take(t, id); now.sum != before.sum {
		t.Errorf("the calls while the store was down changed the tenant's data (%d items before, %d now)", before.items, now.items)
	}
	k.w.unchanged(t, "the calls while the store was down", k.w.ids[0])
	resp, err = k.d.Delete(ctxFor(t, 5*time.Minute), &sdk.DeleteRequest{TenantID: id}, nil)
	if err != nil {
		t.Fatalf("Delete after the store came back: %v", err)
	}
	if resp.DeletedCount != seeded {
		t.Errorf("Delete after the store came back = %d, want %d", resp.DeletedCount, seeded)
	}
}

// failureMidDelete breaks the store at a long Delete's first progress
// report and checks the error's class and partial count against the store.
func (k *kit) failureMidDelete(t *testing.T) {
	inject, how := k.injector()
	if inject == nil {
		t.Skip("the fixture is neither a plugintest.FailureInjector nor a plugintest.StoreOutage: implement one " +
			"to check the partial count of a Delete the store interrupts")
	}
	id := k.o.NewTenantID()
	seeded := k.o.Fixture.Seed(t, id, k.o.CancelSeed)
	var once sync.Once
	var mu sync.Mutex
	var restore func()
	var last atomic.Int64
	_, err := k.d.Delete(ctxFor(t, 5*time.Minute), &sdk.DeleteRequest{TenantID: id}, func(n int64) {
		last.Store(n)
		once.Do(func() {
			r := inject(t)
			mu.Lock()
			restore = r
			mu.Unlock()
		})
	})
	mu.Lock()
	r := restore
	mu.Unlock()
	if r != nil {
		r()
	}
	// A statement the store was running when the connection broke may
	// still commit: wait until the store settles.
	if s, ok := k.o.Fixture.(Settler); ok && r != nil {
		s.Settle(t)
	}
	remaining := settled(func() int64 { return k.o.Fixture.Remaining(t, id) })
	gone := seeded - remaining
	switch {
	case r == nil:
		t.Skipf("Delete of %d units finished before its first progress report; raise CancelSeed", k.o.CancelSeed)
	case err == nil && remaining == 0:
		t.Skipf("Delete finished before %s took effect; raise CancelSeed", how)
	case err == nil:
		t.Fatalf("Delete succeeded after %s, with %d of %d items left: return the failure", how, remaining, seeded)
	}
	if sdk.ClassOf(err) != sdk.ClassRetryable {
		t.Errorf("Delete interrupted by %s failed with a %s error: %v; class it sdk.Retryable so the daemon retries the deleter", how, sdk.ClassOf(err), err)
	}
	deleted, ok := sdk.DeletedBefore(err)
	switch {
	case !ok:
		t.Errorf("Delete interrupted by %s returned no partial count: wrap the error in sdk.PartialDeletion(deletedSoFar, err)", how)
	case deleted > gone:
		t.Errorf("Delete interrupted by %s reported %d deleted, but the store lost only %d of %d: count a batch only once the store confirmed it, "+
			"or the job's report overstates what was erased", how, deleted, gone, seeded)
	case deleted < last.Load():
		t.Errorf("Delete interrupted by %s reported %d deleted, less than the %d its progress had reported: report at least what went", how, deleted, last.Load())
	}
	t.Logf("interrupted by %s: reported %d deleted, the store lost %d of %d", how, deleted, gone, seeded)
	// The next attempts, once the store works again, delete the rest. One
	// that fails again part-way (a pooled connection the outage broke, on
	// a slow machine) counts with its partial count, as the daemon counts
	// it: what all of them report must be what was left.
	deadline := time.Now().Add(30 * time.Second)
	var partial int64
	for {
		resp, err := k.d.Delete(ctxFor(t, 5*time.Minute), &sdk.DeleteRequest{TenantID: id}, nil)
		if err == nil {
			if partial+resp.DeletedCount != remaining {
				t.Errorf("Delete after the failure = %d (and %d in attempts that failed part-way), want the %d remaining",
					resp.DeletedCount, partial, remaining)
			}
			break
		}
		if n, ok := sdk.DeletedBefore(err); ok {
			partial += n
		}
		if time.Now().After(deadline) {
			t.Fatalf("Delete still fails 30 s after the store works again: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if left := k.o.Fixture.Remaining(t, id); left != 0 {
		t.Errorf("%d items remain", left)
	}
	k.w.unchanged(t, "the interrupted Delete and the next one", k.w.ids[0])
}

// injector is how failureMidDelete breaks the store.
func (k *kit) injector() (func(testing.TB) func(), string) {
	if f, ok := k.o.Fixture.(FailureInjector); ok {
		return f.FailMidDelete, "the fixture's injected failure"
	}
	if so, ok := k.o.Fixture.(StoreOutage); ok {
		return func(t testing.TB) func() {
			so.StopStore(t)
			return func() { so.StartStore(t) }
		}, "the store going down"
	}
	return nil, ""
}

// settled polls count until three readings half a second apart agree (for
// up to 15 s) and returns the last: on a loaded machine one pause can fall
// inside a long statement that commits after it.
func settled(count func() int64) int64 {
	prev, same := count(), 0
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
		time.Sleep(cancelGrace)
		cur := count()
		if cur != prev {
			prev, same = cur, 0
			continue
		}
		if same++; same == 2 {
			return cur
		}
	}
	return prev
}
