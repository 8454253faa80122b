package plugintest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/sdk"
)

// DeleterFixture seeds and inspects the real store behind a TenantDeleter.
// It must use the store's own client, not the plugin, to check results.
//
// A fixture may also implement DeleterChecksummer (recommended: bystanders
// are then compared by content, not only by count) and DistinctTenantIDs.
type DeleterFixture interface {
	// Config is the plugin config block pointing at the test store.
	Config(t testing.TB) map[string]any
	// Seed creates n items of the tenant's data and returns how many items
	// Delete will count for it (n, or more when one unit spans several rows).
	Seed(t testing.TB, tenant string, n int) int64
	// Remaining counts the tenant's items in the store directly.
	Remaining(t testing.TB, tenant string) int64
}

// DeleterChecksummer is optional for a DeleterFixture.
type DeleterChecksummer interface {
	// Checksum returns a hash over every item of the tenant, content
	// included, read with the store's own client: any change to any of the
	// tenant's items (deleted, added, modified) must change it.
	Checksum(t testing.TB, tenant string) string
}

// DistinctTenantIDs is optional for a DeleterFixture whose store cannot keep
// every id apart: a uuid column folds "A1..." into "a1...", a numeric key
// folds "04" into "4", and neither stores " 4".
type DistinctTenantIDs interface {
	// StoresDistinct reports whether the store keeps id as a tenant of its
	// own, apart from every other id; the kit seeds bystander tenants only
	// where it does.
	StoresDistinct(id string) bool
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
	// TenantIDFormat is sent in every Configure, as the daemon sends its
	// [daemon] tenant_id_format: "uuid" (the default) or an anchored regular
	// expression. Bystander tenants are seeded only when the format accepts
	// their ids, so run the kit with the most permissive format the plugin
	// supports (as well) to give those checks teeth.
	TenantIDFormat string
	// NewTenantID returns a fresh tenant id, one the format accepts;
	// default a random UUID.
	NewTenantID func() string
	// Seed is how many units to seed per tenant (default 50).
	Seed int
	// BystanderSeed is how many units to seed per bystander tenant
	// (default 3).
	BystanderSeed int
	// CancelSeed is how many units the cancellation check seeds; enough
	// for Delete to take a while (default 20000).
	CancelSeed int
}

// RunTenantDeleter runs the TenantDeleter conformance checks. Next to tenant
// A it seeds tenant B and bystander tenants whose ids differ from A's only in
// case, by a delimiter suffix (A+":x", A+"-x", ...), by surrounding
// whitespace or in the spelling of a number, wherever the format accepts
// them and the store keeps them apart; and it checks, by checksum, that no
// Count, Delete or hostile tenant id ever touches or counts their data.
func RunTenantDeleter(t *testing.T, o DeleterOptions) {
	if o.NewTenantID == nil {
		o.NewTenantID = uuid.NewString
	}
	if o.Seed == 0 {
		o.Seed = 50
	}
	if o.BystanderSeed == 0 {
		o.BystanderSeed = 3
	}
	if o.CancelSeed == 0 {
		o.CancelSeed = 20000
	}
	p := Launch(t, o.Binary, sdk.KindTenantDeleter, o.Env...)
	d := p.Deleter(t)
	configure := func(ctx context.Context, cfg map[string]any) error {
		_, err := d.Configure(ctx, &sdk.ConfigureRequest{Name: "conformance", Config: cfg, TenantIDFormat: o.TenantIDFormat})
		return err
	}

	t.Run("Configure rejects bad config with field errors", func(t *testing.T) {
		needOption(t, len(o.BadConfigs) > 0, "no BadConfigs given")
		for name, cfg := range o.BadConfigs {
			err := configure(ctxFor(t, 30*time.Second), cfg)
			if !errors.Is(err, sdk.ErrInvalidConfig) {
				t.Errorf("%s: Configure error = %v, want sdk.ErrInvalidConfig (return sdk.InvalidConfig with one FieldError per problem)", name, err)
				continue
			}
			var e *sdk.Error
			if !errors.As(err, &e) || len(e.Fields) == 0 {
				t.Errorf("%s: invalid config error has no field problems: %v", name, err)
			}
		}
	})

	if err := configure(ctxFor(t, 30*time.Second), o.Fixture.Config(t)); err != nil {
		t.Fatalf("Configure with the fixture's config and tenant id format %q: %v", o.TenantIDFormat, err)
	}

	a, b := o.NewTenantID(), o.NewTenantID()
	for _, id := range []string{a, b} {
		if err := sdk.CheckTenantID(o.TenantIDFormat, id); err != nil {
			t.Fatalf("NewTenantID returned %q, which the tenant id format refuses: %v", id, err)
		}
	}
	seededA := o.Fixture.Seed(t, a, o.Seed)
	seededB := o.Fixture.Seed(t, b, o.Seed)
	w := newWatch(t, o)
	w.add(t, a, "tenant A")
	w.add(t, b, "tenant B")
	for _, by := range bystandersOf(a) {
		if w.seeded(by.id) || sdk.CheckTenantID(o.TenantIDFormat, by.id) != nil || !w.distinct(by.id) {
			continue
		}
		o.Fixture.Seed(t, by.id, o.BystanderSeed)
		w.add(t, by.id, fmt.Sprintf("bystander %q (%s as tenant A)", by.id, by.why))
	}
	t.Logf("tenant A %q, tenant B %q, bystanders %q", a, b, w.ids[2:])
	if !w.checksums {
		t.Logf("the fixture has no Checksum method: tenants are compared by count only; implement plugintest.DeleterChecksummer to compare content")
	}

	t.Run("Count equals what was seeded", func(t *testing.T) {
		for tenant, want := range map[string]int64{a: seededA, b: seededB} {
			got, err := d.Count(ctxFor(t, time.Minute), &sdk.CountRequest{TenantID: tenant})
			if err != nil {
				t.Fatalf("Count(%q): %v", tenant, err)
			}
			if got.Count > want {
				t.Errorf("Count(%q) = %d, want %d: it counts items of other tenants (seeded next to it: %q); match the tenant id exactly, byte for byte", tenant, got.Count, want, w.others(tenant))
			} else if got.Count != want {
				t.Errorf("Count(%q) = %d, want %d", tenant, got.Count, want)
			}
		}
		w.unchanged(t, "Count")
	})

	t.Run("hostile tenant ids delete nothing of anyone else", func(t *testing.T) {
		for _, id := range HostileTenantIDs(b) {
			if w.seeded(id) {
				continue
			}
			c, err := d.Count(ctxFor(t, time.Minute), &sdk.CountRequest{TenantID: id})
			if err == nil && c.Count != 0 {
				t.Errorf("Count(%q) = %d, want 0: a tenant id is data, never syntax (escape glob and LIKE metacharacters, bind SQL parameters, refuse an id that is not the canonical text of the key's type)", id, c.Count)
			}
			resp, err := d.Delete(ctxFor(t, time.Minute), &sdk.DeleteRequest{TenantID: id}, nil)
			if err == nil && resp.DeletedCount != 0 {
				t.Errorf("Delete(%q) deleted %d, want 0: a tenant id is data, never syntax (escape glob and LIKE metacharacters, bind SQL parameters, refuse an id that is not the canonical text of the key's type)", id, resp.DeletedCount)
			}
			if err != nil && sdk.ClassOf(err) != sdk.ClassPermanent {
				t.Errorf("Delete(%q) failed with a non-permanent error: %v; refuse an id the store cannot take with sdk.InvalidArgument, so the daemon does not retry it", id, err)
			}
			w.unchanged(t, fmt.Sprintf("Count and Delete(%q)", id))
			if t.Failed() {
				t.FailNow()
			}
		}
	})

	t.Run("Delete returns the count, streams progress, and leaves B and the bystanders untouched", func(t *testing.T) {
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
		w.unchanged(t, "Delete(A)", a)
	})

	t.Run("Count afterwards is 0 and a second Delete deletes 0", func(t *testing.T) {
		c, err := d.Count(ctxFor(t, time.Minute), &sdk.CountRequest{TenantID: a})
		if err != nil || c.Count != 0 {
			t.Errorf("Count(A) after delete = %v, %v; want 0 (bystanders seeded next to A: %q)", c, err, w.ids[2:])
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
		w.unchanged(t, "a second Delete(A)", a)
	})

	t.Run("cancelling the context stops the work promptly", func(t *testing.T) {
		c := o.NewTenantID()
		seeded := o.Fixture.Seed(t, c, o.CancelSeed)
		ctx, cancel := context.WithCancel(ctxFor(t, 5*time.Minute))
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
			// Not a race: the first progress a plugin reports always
			// reaches the caller before the result does.
			t.Fatalf("Delete of %d units returned (error: %v) without reporting progress first: report progress as the work goes, "+
				"or raise CancelSeed above what one batch deletes", o.CancelSeed, err)
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
		w.unchanged(t, "the cancelled Delete and the next one", a)
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
