package plugintest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/lifecycled/lifecycled/sdk"
)

// The Plan checks, for a plugin that implements sdk.Planner (optional: a
// plugin that does not answers Unsupported, and the checks are skipped).
// A plan is what an operator approves before a deletion, and the daemon
// refuses to run a job whose plan at start has another fingerprint than
// the approved one. So the plan must count what Delete deletes, step by
// step as Count breaks it down, and its fingerprint must depend on the
// schema or config only: never on the tenant, never on counts.

// Plan passes the call on and records its error for the secrets check.
func (r *recorder) Plan(ctx context.Context, req *sdk.PlanRequest) (*sdk.PlanResponse, error) {
	return recordOptional(r, "Plan", req.TenantID, "sdk.Planner", func(p sdk.Planner) (*sdk.PlanResponse, error) {
		return p.Plan(ctx, req)
	})
}

const fingerprintRule = "the fingerprint must hash only the schema or config the plan is computed from (tables, keys, patterns), never the tenant id or a count, " +
	"so that a plan approved for one tenant still matches when the job starts"

// planBefore checks the plans of A and B (seeded) and of a tenant with no
// data against Count, and that hostile ids plan nothing.
func (k *kit) planBefore(t *testing.T, a, b string, seededA, seededB int64) {
	pa, err := k.d.Plan(ctxFor(t, time.Minute), &sdk.PlanRequest{TenantID: a})
	if errors.Is(err, sdk.ErrUnsupported) {
		k.noPlan = true
		t.Skipf("the plugin does not implement sdk.Planner (optional; the daemon then shows no plan and cannot hold a job to an approved one): %v", err)
	}
	if err != nil {
		t.Fatalf("Plan(A): %v", err)
	}
	k.planFingerprint = pa.Fingerprint
	if strings.TrimSpace(pa.Fingerprint) == "" {
		t.Errorf("Plan(A) has an empty fingerprint: %s", fingerprintRule)
	}
	k.checkPlanAgainstCount(t, "A", a, pa, seededA)

	pb, err := k.d.Plan(ctxFor(t, time.Minute), &sdk.PlanRequest{TenantID: b})
	if err != nil {
		t.Fatalf("Plan(B): %v", err)
	}
	k.checkPlanAgainstCount(t, "B", b, pb, seededB)
	if pb.Fingerprint != pa.Fingerprint {
		t.Errorf("Plan(A) and Plan(B) have different fingerprints (%s, %s): %s", short(pa.Fingerprint), short(pb.Fingerprint), fingerprintRule)
	}
	// A tenant with no data: the seeded tenants have the same counts, so
	// only a tenant with other counts shows a fingerprint that hashes them.
	empty := k.o.NewTenantID()
	pe, err := k.d.Plan(ctxFor(t, time.Minute), &sdk.PlanRequest{TenantID: empty})
	switch {
	case err != nil:
		t.Errorf("Plan(%q), a tenant with no data: %v", empty, err)
	case pe.Total() != 0:
		t.Errorf("Plan(%q), a tenant with no data, expects %d items", empty, pe.Total())
	case pe.Fingerprint != pa.Fingerprint:
		t.Errorf("Plan of a tenant with no data has fingerprint %s, Plan(A) %s: %s", short(pe.Fingerprint), short(pa.Fingerprint), fingerprintRule)
	}
	again, err := k.d.Plan(ctxFor(t, time.Minute), &sdk.PlanRequest{TenantID: a})
	if err != nil {
		t.Fatalf("Plan(A) again: %v", err)
	}
	if again.Fingerprint != pa.Fingerprint {
		t.Errorf("Plan(A) twice gave fingerprints %s and %s: it must be stable while nothing changes", short(pa.Fingerprint), short(again.Fingerprint))
	}
	if fmt.Sprint(again.Steps) != fmt.Sprint(pa.Steps) {
		t.Errorf("Plan(A) twice gave other steps, %v then %v, with nothing changed in between", pa.Steps, again.Steps)
	}
	k.w.unchanged(t, "Plan")

	for _, id := range HostileTenantIDs(b) {
		if k.w.seeded(id) {
			continue
		}
		p, err := k.d.Plan(ctxFor(t, time.Minute), &sdk.PlanRequest{TenantID: id})
		switch {
		case err == nil && p.Total() != 0:
			t.Errorf("Plan(%q) expects %d items, want 0: %s", id, p.Total(), dataNotSyntax)
		case err != nil && sdk.ClassOf(err) != sdk.ClassPermanent:
			t.Errorf("Plan(%q) failed with a non-permanent error: %v; refuse an id the store cannot take with sdk.InvalidArgument", id, err)
		}
	}
	k.w.unchanged(t, "Plan of hostile ids")
}

// checkPlanAgainstCount compares a plan with what was seeded and with
// Count's breakdown, step target by breakdown key.
func (k *kit) checkPlanAgainstCount(t *testing.T, who, id string, p *sdk.PlanResponse, seeded int64) {
	t.Helper()
	if p.Total() != seeded {
		t.Errorf("Plan(%s) expects %d items in all, want the %d seeded: the steps must add up to what Delete deletes (compute them with Count's code)", who, p.Total(), seeded)
	}
	byTarget := map[string]int64{}
	for i, s := range p.Steps {
		if s.Target == "" || s.Via == "" {
			t.Errorf("Plan(%s) step %d has an empty target or via (%+v): say what is deleted from and how its items are found", who, i, s)
		}
		if s.Expected < 0 {
			t.Errorf("Plan(%s) step %d expects %d items", who, i, s.Expected)
		}
		if len(id) >= 8 && (strings.Contains(s.Via, id) || strings.Contains(s.Target, id)) {
			t.Errorf("Plan(%s) step %d names the tenant id (%+v): write a placeholder, so that every tenant's plan reads the same", who, i, s)
		}
		byTarget[s.Target] += s.Expected
	}
	c, err := k.d.Count(ctxFor(t, time.Minute), &sdk.CountRequest{TenantID: id})
	if err != nil {
		t.Errorf("Count(%s): %v", who, err)
		return
	}
	if len(c.Breakdown) == 0 {
		return // Count's breakdown is optional
	}
	keys := map[string]bool{}
	for k := range byTarget {
		keys[k] = true
	}
	for k := range c.Breakdown {
		keys[k] = true
	}
	var names []string
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		if byTarget[name] != c.Breakdown[name] {
			t.Errorf("Plan(%s) expects %d items in %q, Count's breakdown says %d: a step's target is the breakdown's key, and its count Count's",
				who, byTarget[name], name, c.Breakdown[name])
		}
	}
}

// planAfter checks that after Delete(A) its plan expects nothing, under
// the same fingerprint as before.
func (k *kit) planAfter(t *testing.T, a string) {
	if k.noPlan {
		t.Skip("the plugin does not implement sdk.Planner")
	}
	p, err := k.d.Plan(ctxFor(t, time.Minute), &sdk.PlanRequest{TenantID: a})
	if err != nil {
		t.Fatalf("Plan(A) after Delete: %v", err)
	}
	if p.Total() != 0 {
		t.Errorf("Plan(A) after Delete expects %d items, want 0", p.Total())
	}
	if k.planFingerprint != "" && p.Fingerprint != k.planFingerprint {
		t.Errorf("Plan(A)'s fingerprint changed with Delete (%s -> %s) though nothing but the data did: %s",
			short(k.planFingerprint), short(p.Fingerprint), fingerprintRule)
	}
}

// planStale checks that Delete refuses a plan fingerprint that is not the
// plugin's current one. The daemon checks the plan at the start of an
// attempt and sends that plan's fingerprint with Delete; a store that
// changed in between (a table added, a key changed, a DSN repointed) must
// not be deleted from as it is now: Delete recomputes the fingerprint from
// what it is about to delete with and refuses, deleting nothing. The kit
// sends a fingerprint the plugin never gave, for tenant B.
func (k *kit) planStale(t *testing.T, b string) {
	if k.noPlan {
		t.Skip("the plugin does not implement sdk.Planner")
	}
	stale := "sha256:" + strings.Repeat("0", 64)
	if stale == k.planFingerprint {
		stale = "sha256:" + strings.Repeat("1", 64)
	}
	resp, err := k.d.Delete(ctxFor(t, 5*time.Minute), &sdk.DeleteRequest{TenantID: b, PlanFingerprint: stale}, nil)
	switch {
	case err == nil:
		t.Errorf("Delete(B) with plan fingerprint %s, which the plugin's Plan never gave, succeeded (deleted %d): "+
			"the daemon sends the fingerprint of the plan it checked; when the store no longer gives it, Delete must delete nothing "+
			"and fail permanently (sdk.Fingerprints.Check returns sdk.PlanChanged)", short(stale), resp.DeletedCount)
	case sdk.ClassOf(err) != sdk.ClassPermanent:
		t.Errorf("Delete(B) with a stale plan fingerprint failed with a non-permanent error: %v; a changed plan needs an operator, "+
			"retrying cannot help (sdk.PlanChanged)", err)
	default:
		if n, ok := sdk.DeletedBefore(err); ok && n != 0 {
			t.Errorf("Delete(B) with a stale plan fingerprint says it deleted %d before refusing: check the fingerprint before deleting anything", n)
		}
	}
	k.w.unchanged(t, "Delete with a stale plan fingerprint")
}
