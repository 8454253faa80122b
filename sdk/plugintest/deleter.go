package plugintest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/sdk"
)

// DeleterFixture seeds and inspects the real store behind a TenantDeleter.
// It must use the store's own client, not the plugin, to check results.
type DeleterFixture interface {
	// Config is the plugin config block pointing at the test store.
	Config(t testing.TB) map[string]any
	// Seed creates n items of the tenant's data and returns how many items
	// Delete will count for it (n, or more when one unit spans several rows).
	Seed(t testing.TB, tenant string, n int) int64
	// Remaining counts the tenant's items in the store directly.
	Remaining(t testing.TB, tenant string) int64
}

// DeleterOptions configure RunTenantDeleter.
type DeleterOptions struct {
	// Binary is the built plugin.
	Binary string
	// Env is the plugin's environment (it inherits none).
	Env     []string
	Fixture DeleterFixture
	// BadConfigs are configs Configure must reject with field problems.
	BadConfigs map[string]map[string]any
	// NewTenantID returns a fresh tenant id; default a random UUID.
	NewTenantID func() string
	// Seed is how many units to seed per tenant (default 50).
	Seed int
	// CancelSeed is how many units the cancellation check seeds; enough
	// for Delete to take a while (default 20000).
	CancelSeed int
}

// HostileTenantIDs are ids that must delete nothing of anyone else: glob,
// SQL and path metacharacters, spaces, and patterns built from a real id.
func HostileTenantIDs(victim string) []string {
	ids := []string{"*", "?", "[", "[a-z]*", "'", "' OR '1'='1", "%", "%%", "..", "../..", "a b", " ", `\`, "*:*",
		"'; DELETE FROM x; --", "\x00", "{tenant}"}
	if len(victim) > 2 {
		ids = append(ids,
			victim[:len(victim)-1]+"?",
			victim[:len(victim)-2]+"*",
			victim[:len(victim)-1]+"%",
			victim[:len(victim)-1]+"_",
			"["+victim[:1]+"]"+victim[1:],
			victim+"*",
			"*"+victim[1:],
			"../"+victim,
			victim+"/..",
			" "+victim,
			strings.ToUpper(victim),
		)
	}
	return ids
}

// RunTenantDeleter runs the TenantDeleter conformance checks.
func RunTenantDeleter(t *testing.T, o DeleterOptions) {
	if o.NewTenantID == nil {
		o.NewTenantID = uuid.NewString
	}
	if o.Seed == 0 {
		o.Seed = 50
	}
	if o.CancelSeed == 0 {
		o.CancelSeed = 20000
	}
	p := Launch(t, o.Binary, sdk.KindTenantDeleter, o.Env...)
	d := p.Deleter(t)

	t.Run("Configure rejects bad config with field errors", func(t *testing.T) {
		if len(o.BadConfigs) == 0 {
			t.Skip("no BadConfigs given")
		}
		for name, cfg := range o.BadConfigs {
			_, err := d.Configure(ctxFor(t, 30*time.Second), &sdk.ConfigureRequest{Name: "conformance", Config: cfg})
			if !errors.Is(err, sdk.ErrInvalidConfig) {
				t.Errorf("%s: Configure error = %v, want sdk.ErrInvalidConfig", name, err)
				continue
			}
			var e *sdk.Error
			if !errors.As(err, &e) || len(e.Fields) == 0 {
				t.Errorf("%s: invalid config error has no field problems: %v", name, err)
			}
		}
	})

	if _, err := d.Configure(ctxFor(t, 30*time.Second), &sdk.ConfigureRequest{Name: "conformance", Config: o.Fixture.Config(t)}); err != nil {
		t.Fatalf("Configure with the fixture's config: %v", err)
	}

	a, b := o.NewTenantID(), o.NewTenantID()
	seededA := o.Fixture.Seed(t, a, o.Seed)
	seededB := o.Fixture.Seed(t, b, o.Seed)

	t.Run("Count equals what was seeded", func(t *testing.T) {
		for tenant, want := range map[string]int64{a: seededA, b: seededB} {
			got, err := d.Count(ctxFor(t, time.Minute), &sdk.CountRequest{TenantID: tenant})
			if err != nil {
				t.Fatalf("Count(%s): %v", tenant, err)
			}
			if got.Count != want {
				t.Errorf("Count(%s) = %d, want %d", tenant, got.Count, want)
			}
		}
	})

	t.Run("hostile tenant ids delete nothing of anyone else", func(t *testing.T) {
		for _, id := range HostileTenantIDs(b) {
			c, err := d.Count(ctxFor(t, time.Minute), &sdk.CountRequest{TenantID: id})
			if err == nil && c.Count != 0 {
				t.Errorf("Count(%q) = %d, want 0", id, c.Count)
			}
			resp, err := d.Delete(ctxFor(t, time.Minute), &sdk.DeleteRequest{TenantID: id}, nil)
			if err == nil && resp.DeletedCount != 0 {
				t.Errorf("Delete(%q) deleted %d, want 0", id, resp.DeletedCount)
			}
			if err != nil && sdk.ClassOf(err) != sdk.ClassPermanent {
				t.Errorf("Delete(%q) failed with a non-permanent error: %v", id, err)
			}
			if got := o.Fixture.Remaining(t, b); got != seededB {
				t.Fatalf("after Delete(%q), tenant B has %d items, want %d untouched", id, got, seededB)
			}
			if got := o.Fixture.Remaining(t, a); got != seededA {
				t.Fatalf("after Delete(%q), tenant A has %d items, want %d untouched", id, got, seededA)
			}
		}
	})

	t.Run("Delete returns the count, streams progress, and leaves B untouched", func(t *testing.T) {
		var mu sync.Mutex
		var progress []int64
		resp, err := d.Delete(ctxFor(t, 5*time.Minute), &sdk.DeleteRequest{TenantID: a}, func(n int64) {
			mu.Lock()
			progress = append(progress, n)
			mu.Unlock()
		})
		if err != nil {
			t.Fatalf("Delete(A): %v", err)
		}
		if resp.DeletedCount != seededA {
			t.Errorf("Delete(A) = %d, want %d", resp.DeletedCount, seededA)
		}
		mu.Lock()
		defer mu.Unlock()
		if seededA > 0 && len(progress) == 0 {
			t.Errorf("Delete(A) streamed no progress")
		}
		for i := 1; i < len(progress); i++ {
			if progress[i] < progress[i-1] {
				t.Errorf("progress went backwards: %v", progress)
			}
		}
		if n := len(progress); n > 0 && progress[n-1] > seededA {
			t.Errorf("progress %d exceeds the deleted count %d", progress[n-1], seededA)
		}
		if got := o.Fixture.Remaining(t, a); got != 0 {
			t.Errorf("tenant A still has %d items in the store", got)
		}
		if got := o.Fixture.Remaining(t, b); got != seededB {
			t.Errorf("tenant B has %d items, want %d untouched", got, seededB)
		}
	})

	t.Run("Count afterwards is 0 and a second Delete deletes 0", func(t *testing.T) {
		c, err := d.Count(ctxFor(t, time.Minute), &sdk.CountRequest{TenantID: a})
		if err != nil || c.Count != 0 {
			t.Errorf("Count(A) after delete = %v, %v; want 0", c, err)
		}
		resp, err := d.Delete(ctxFor(t, time.Minute), &sdk.DeleteRequest{TenantID: a}, nil)
		if err != nil {
			t.Fatalf("second Delete(A): %v", err)
		}
		if resp.DeletedCount != 0 {
			t.Errorf("second Delete(A) = %d, want 0", resp.DeletedCount)
		}
		c, err = d.Count(ctxFor(t, time.Minute), &sdk.CountRequest{TenantID: b})
		if err != nil || c.Count != seededB {
			t.Errorf("Count(B) = %v, %v; want %d", c, err, seededB)
		}
	})

	t.Run("cancelling the context stops the work promptly", func(t *testing.T) {
		c := o.NewTenantID()
		seeded := o.Fixture.Seed(t, c, o.CancelSeed)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var once sync.Once
		cancelledAt := make(chan time.Time, 1)
		done := make(chan error, 1)
		go func() {
			_, err := d.Delete(ctx, &sdk.DeleteRequest{TenantID: c}, func(n int64) {
				once.Do(func() {
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
			t.Fatal("Delete did not return")
		}
		var took time.Duration
		select {
		case at := <-cancelledAt:
			took = time.Since(at)
		default:
			t.Skipf("Delete of %d units finished before its first progress; raise CancelSeed", o.CancelSeed)
		}
		if took > 5*time.Second {
			t.Errorf("Delete returned %s after cancellation, want promptly", took)
		}
		// Requests the plugin had in flight when it was cancelled may still
		// land in the store: wait for the count to settle.
		remaining := settled(t, func() int64 { return o.Fixture.Remaining(t, c) })
		if err == nil && remaining != 0 {
			t.Errorf("Delete succeeded after cancellation but %d items remain", remaining)
		}
		if err != nil {
			if sdk.ClassOf(err) != sdk.ClassRetryable {
				t.Errorf("cancelled Delete error is %v (%s), want retryable", err, sdk.ClassOf(err))
			}
			// After the caller cancels, the plugin's final count cannot reach
			// it; the last progress it saw is a lower bound.
			if deleted, ok := sdk.DeletedBefore(err); ok && deleted+remaining > seeded {
				t.Errorf("cancelled Delete reported %d deleted, but the store has %d of %d left", deleted, remaining, seeded)
			}
		}
		// The rest is deleted by the next call.
		resp, err := d.Delete(ctxFor(t, 5*time.Minute), &sdk.DeleteRequest{TenantID: c}, nil)
		if err != nil {
			t.Fatalf("Delete after cancellation: %v", err)
		}
		if resp.DeletedCount != remaining {
			t.Errorf("Delete after cancellation = %d, want the %d remaining", resp.DeletedCount, remaining)
		}
		if got := o.Fixture.Remaining(t, c); got != 0 {
			t.Errorf("%d items remain", got)
		}
		if got := o.Fixture.Remaining(t, b); got != seededB {
			t.Errorf("tenant B has %d items, want %d", got, seededB)
		}
	})
}

// settled polls count until two readings 300 ms apart agree (up to 15 s).
func settled(t testing.TB, count func() int64) int64 {
	prev := count()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
		time.Sleep(300 * time.Millisecond)
		cur := count()
		if cur == prev {
			return cur
		}
		prev = cur
	}
	return prev
}
