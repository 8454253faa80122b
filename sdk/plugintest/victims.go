package plugintest

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lifecycled/lifecycled/sdk"
)

// seedVictims seeds the tenants besides A that deleteVictims erases: one
// whose id holds an accented letter and one whose id is a number (unless A's
// already is), each with bystanders whose ids a sloppy match takes for it.
// It returns them and adds to skipped what it could not seed.
func (k *kit) seedVictims(t *testing.T, skipped []string) ([]victim, []string) {
	var out []victim
	add := func(id, why string, bys []bystander) {
		if sdk.CheckTenantID(k.o.TenantIDFormat, id) != nil || !k.w.distinct(id) || k.w.seeded(id) {
			skipped = append(skipped, fmt.Sprintf("%q (%s) and its bystanders", id, why))
			return
		}
		n := k.o.Fixture.Seed(t, id, k.o.BystanderSeed)
		k.w.add(t, id, fmt.Sprintf("tenant %q (%s)", id, why))
		out = append(out, victim{id: id, why: why, seeded: n})
		for _, by := range bys {
			if !k.seedBystander(t, by, fmt.Sprintf("%q", id)) {
				skipped = append(skipped, fmt.Sprintf("%q (%s as %q)", by.id, by.why, id))
			}
		}
	}
	id, bys := unicodeVictim(k.o.NewTenantID())
	add(id, "a tenant whose id has an accented letter", bys)
	if !numberRE.MatchString(k.w.ids[0]) { // tenant A's bystanders cover a numeric A
		id, bys := numericVictim(100000 + rand.IntN(800000))
		add(id, "a tenant whose id is a number", bys)
	}
	return out, skipped
}

// deleteVictims erases each victim and checks that exactly its data went.
func (k *kit) deleteVictims(t *testing.T) {
	if len(k.victims) == 0 {
		t.Skipf("the tenant id format %q refuses ids with accented letters and numeric ids (or the fixture says the store cannot keep them apart): "+
			"run the kit (also) with a format that accepts them, such as `^.{1,200}$`", k.o.TenantIDFormat)
	}
	for _, v := range k.victims {
		c, err := k.d.Count(ctxFor(t, time.Minute), &sdk.CountRequest{TenantID: v.id})
		switch {
		case err != nil:
			t.Errorf("Count(%q): %v", v.id, err)
		case c.Count != v.seeded:
			t.Errorf("Count(%q) = %d, want %d: compare tenant ids byte for byte (no Unicode normalisation, no accent or case folding, no numeric comparison); "+
				"ids seeded next to it: %q", v.id, c.Count, v.seeded, k.w.others(v.id))
		}
		resp, err := k.d.Delete(ctxFor(t, 5*time.Minute), &sdk.DeleteRequest{TenantID: v.id}, nil)
		if err != nil {
			t.Errorf("Delete(%q): %v", v.id, err)
		} else if resp.DeletedCount != v.seeded {
			t.Errorf("Delete(%q) = %d, want %d", v.id, resp.DeletedCount, v.seeded)
		}
		if left := k.o.Fixture.Remaining(t, v.id); left != 0 {
			t.Errorf("%q still has %d items in the store after its Delete", v.id, left)
		}
		k.w.forget(v.id)
		k.w.unchanged(t, fmt.Sprintf("Delete(%q)", v.id), k.w.ids[0])
	}
}
