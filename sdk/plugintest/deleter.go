package plugintest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/sdk"
)

// DeleterOptions configure RunTenantDeleter.
type DeleterOptions struct {
	// Binary is the built plugin.
	Binary string
	// Env is the plugin's environment (it inherits none).
	Env     []string
	Fixture DeleterFixture
	// BadConfigs are configs Configure must reject with field problems,
	// by name. The error must name the field that is wrong: the one
	// BadConfigFields gives for the name, or else a key in which the bad
	// config differs from the fixture's (added, removed or changed).
	BadConfigs map[string]map[string]any
	// BadConfigFields names, per BadConfigs entry, the field its error must
	// name ("tables", "batch_size", ...); a problem under "tables[2]" or
	// "tables.x" names "tables".
	BadConfigFields map[string]string
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
	// CancelSeed is how many units the cancellation and failure checks
	// seed: enough for Delete to take a few seconds (default 20000).
	CancelSeed int
	// ConcurrentWithin is how long the Deletes the concurrency check runs
	// at once, Seed units each, may take together (default 2 minutes).
	ConcurrentWithin time.Duration
}

// RunTenantDeleter runs the TenantDeleter conformance checks. Next to tenant
// A it seeds tenant B and bystander tenants whose ids differ from A's only in
// case, by a delimiter suffix (A+":x", A+"-x", ...), by surrounding
// white space or in the spelling of a number, and tenants whose ids differ
// only in Unicode normalisation, accents or case of a non-ASCII letter,
// wherever the format accepts them and the store keeps them apart; and it
// checks, by checksum, that no Count, Delete or hostile tenant id ever
// touches or counts their data. It checks that cancellation stops the work
// in the store, not only the call; with the optional fixture interfaces,
// the error classes of a store that is down or unreachable and the partial
// count of an interrupted Delete; that config errors name the field; and
// that no secret appears in any error or log line of the plugin. For a
// plugin that is an sdk.Planner, it checks that plans add up to the seeded
// count and agree with Count's breakdown step by step, that hostile ids
// plan nothing, that the fingerprint is the same for every tenant, across
// calls and after Delete, and that Delete refuses a fingerprint that is
// not the current one, deleting nothing (see checks_plan.go).
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
	if o.ConcurrentWithin == 0 {
		o.ConcurrentWithin = 2 * time.Minute
	}
	p := Launch(t, o.Binary, sdk.KindTenantDeleter, o.Env...)
	k := &kit{o: o, p: p, d: &recorder{d: p.Deleter(t)}, secrets: &secretSet{}}
	good := o.Fixture.Config(t)
	k.secrets.addConfig(good, "the fixture's config")

	t.Run("Configure rejects bad config, naming the field", k.badConfigs)
	t.Run("Configure against an unreachable store is retryable and names the field", k.unreachable)

	if err := k.configure(ctxFor(t, 30*time.Second), good); err != nil {
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
	k.w = w
	w.add(t, a, "tenant A")
	w.add(t, b, "tenant B")
	var skipped []string
	for _, by := range bystandersOf(a) {
		if !k.seedBystander(t, by, "tenant A") {
			skipped = append(skipped, fmt.Sprintf("%q (%s)", by.id, by.why))
		}
	}
	k.victims, skipped = k.seedVictims(t, skipped)
	k.skipped = skipped
	t.Logf("tenant A %q, tenant B %q, watched %q", a, b, w.ids[2:])
	if len(skipped) > 0 {
		t.Logf("not seeded, because the tenant id format %q refuses them or the fixture says the store cannot keep them apart: %q; "+
			"run the kit (also) with the most permissive format the plugin supports to check them", o.TenantIDFormat, skipped)
	}
	if !w.checksums {
		t.Logf("the fixture has no Checksum method: tenants are compared by count only; implement plugintest.DeleterChecksummer to compare content")
	}
	d := k.d

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

	t.Run("Plan matches Count, with a fingerprint that names no tenant and no count", func(t *testing.T) {
		k.planBefore(t, a, b, seededA, seededB)
	})

	t.Run("Delete refuses a plan fingerprint that is not the current one, deleting nothing", func(t *testing.T) { k.planStale(t, b) })

	t.Run("hostile tenant ids delete nothing of anyone else", func(t *testing.T) { k.hostile(t, b) })

	t.Run("Verify finds the tenant's items before anything is deleted", func(t *testing.T) { k.proofBefore(t, a, seededA) })

	var deletedA *sdk.DeleteResponse

	t.Run("Delete returns the count, streams progress, and leaves B and the bystanders untouched", func(t *testing.T) {
		var mu sync.Mutex
		var progress []int64
		// With the plan's fingerprint, as the daemon calls it after its check.
		resp, err := d.Delete(ctxFor(t, 5*time.Minute), &sdk.DeleteRequest{TenantID: a, PlanFingerprint: k.planFingerprint}, func(n int64) {
			mu.Lock()
			progress = append(progress, n)
			mu.Unlock()
		})
		if err != nil {
			t.Fatalf("Delete(A): %v", err)
		}
		deletedA = resp
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
	w.forget(a)

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

	t.Run("after Delete, Plan expects 0 under the same fingerprint", func(t *testing.T) { k.planAfter(t, a) })

	t.Run("after Delete, the independent proof finds nothing of A and still finds B", func(t *testing.T) {
		k.proofAfter(t, deletedA, a, b, seededB)
	})

	t.Run("ids that differ only in Unicode form, accents, case or the spelling of a number are other tenants", k.deleteVictims)
	t.Run("under a permissive tenant id format too", k.permissive)
	t.Run("several Deletes at once all finish, each with its count", k.concurrent)
	t.Run("cancelling Delete stops the work in the store", k.cancellation)
	t.Run("with the store down, Count and Delete fail retryable and the plugin recovers", k.outage)
	t.Run("a failure part way through Delete reports what it deleted", k.failureMidDelete)
	t.Run("no secret in any error or log line", k.noSecrets)
}

// kit is one run of RunTenantDeleter.
type kit struct {
	o       DeleterOptions
	p       *Process
	d       *recorder
	w       *watch
	secrets *secretSet
	victims []victim
	skipped []string // bystanders and victims the format or store did not allow
	// noPlan: the plugin is not an sdk.Planner; planFingerprint is Plan(A)'s.
	noPlan          bool
	planFingerprint string
}

func (k *kit) configure(ctx context.Context, cfg map[string]any) error {
	_, err := k.d.Configure(ctx, &sdk.ConfigureRequest{Name: "conformance", Config: cfg, TenantIDFormat: k.o.TenantIDFormat})
	return err
}

// hostile sends HostileTenantIDs(victim) to Count and Delete: each must
// count and delete nothing, or be refused with a permanent error.
func (k *kit) hostile(t *testing.T, victim string) {
	failed := t.Failed()
	for _, id := range HostileTenantIDs(victim) {
		if k.w.seeded(id) {
			continue
		}
		c, err := k.d.Count(ctxFor(t, time.Minute), &sdk.CountRequest{TenantID: id})
		if err == nil && c.Count != 0 {
			t.Errorf("Count(%q) = %d, want 0: %s", id, c.Count, dataNotSyntax)
		}
		resp, err := k.d.Delete(ctxFor(t, time.Minute), &sdk.DeleteRequest{TenantID: id}, nil)
		if err == nil && resp.DeletedCount != 0 {
			t.Errorf("Delete(%q) deleted %d, want 0: %s", id, resp.DeletedCount, dataNotSyntax)
		}
		if err != nil && sdk.ClassOf(err) != sdk.ClassPermanent {
			t.Errorf("Delete(%q) failed with a non-permanent error: %v; refuse an id the store cannot take with sdk.InvalidArgument, so the daemon does not retry it", id, err)
		}
		k.w.unchanged(t, fmt.Sprintf("Count and Delete(%q)", id))
		if t.Failed() && !failed {
			// The first id that did damage says enough; the rest would
			// report the same damage again.
			return
		}
	}
}

const dataNotSyntax = "a tenant id is data, never syntax (escape glob and LIKE metacharacters, bind SQL parameters, " +
	"compare byte for byte where the store ignores case, accents or trailing spaces, refuse an id that is not the canonical text of the key's type)"

// seedBystander seeds by next to the tenant it imitates when the format
// accepts its id and the store keeps it apart; it reports whether it did.
func (k *kit) seedBystander(t *testing.T, by bystander, of string) bool {
	if k.w.seeded(by.id) {
		return true
	}
	if sdk.CheckTenantID(k.o.TenantIDFormat, by.id) != nil || !k.w.distinct(by.id) {
		return false
	}
	k.o.Fixture.Seed(t, by.id, k.o.BystanderSeed)
	k.w.add(t, by.id, fmt.Sprintf("bystander %q (%s as %s)", by.id, by.why, of))
	return true
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
