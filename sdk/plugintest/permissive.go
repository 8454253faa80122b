package plugintest

import (
	"fmt"
	"testing"
	"time"

	"github.com/lifecycled/lifecycled/sdk"
)

// PermissiveFormat is the tenant id format of the kit's permissive pass: any
// id the daemon can send at all (CheckTenantID refuses control characters
// and ids over 255 bytes whatever the format).
const PermissiveFormat = `^.{1,255}$`

// permissive repeats the checks of ids that differ from a tenant's only in
// white space, case, accents, Unicode form, a suffix or the spelling of a
// number under PermissiveFormat, when the run's own format refused some of
// them. A plugin that is safe only because the daemon's format keeps such
// ids away becomes unsafe the day an operator widens the format; Delete of
// tenant-b on a MySQL column with a PAD SPACE collation erases "tenant-b "
// too, which no UUID format would show.
func (k *kit) permissive(t *testing.T) {
	if len(k.skipped) == 0 {
		t.Skipf("the format %q let the kit seed every bystander already", k.o.TenantIDFormat)
	}
	good := k.o.Fixture.Config(t)
	p := *k
	p.o.TenantIDFormat = PermissiveFormat
	if err := p.configure(ctxFor(t, time.Minute), good); err != nil {
		t.Skipf("the plugin refuses tenant id format %q with the fixture's config (%v), so the bystanders the run's format %q refused "+
			"were not checked: %q. If an operator can configure a format that accepts them, run the kit with it",
			PermissiveFormat, err, k.o.TenantIDFormat, k.skipped)
	}
	defer func() {
		if err := k.configure(ctxFor(t, time.Minute), good); err != nil {
			t.Fatalf("Configure with the run's format %q again: %v", k.o.TenantIDFormat, err)
		}
	}()
	id := k.o.NewTenantID()
	seeded := k.o.Fixture.Seed(t, id, k.o.Seed)
	k.w.add(t, id, "tenant P (of the permissive pass)")
	var skipped []string
	for _, by := range bystandersOf(id) {
		if !p.seedBystander(t, by, "tenant P") {
			skipped = append(skipped, fmt.Sprintf("%q (%s)", by.id, by.why))
		}
	}
	p.victims, skipped = p.seedVictims(t, skipped)
	if len(skipped) > 0 {
		t.Logf("not seeded even under %q, because the fixture says the store cannot keep them apart: %q", PermissiveFormat, skipped)
	}
	c, err := p.d.Count(ctxFor(t, time.Minute), &sdk.CountRequest{TenantID: id})
	switch {
	case err != nil:
		t.Fatalf("Count(P) under tenant id format %q: %v", PermissiveFormat, err)
	case c.Count != seeded:
		t.Errorf("Count(%q) = %d, want %d under tenant id format %q: match the tenant id exactly, byte for byte (seeded next to it: %q)",
			id, c.Count, seeded, PermissiveFormat, k.w.others(id))
	}
	p.hostile(t, id)
	resp, err := p.d.Delete(ctxFor(t, 5*time.Minute), &sdk.DeleteRequest{TenantID: id}, nil)
	if err != nil {
		t.Fatalf("Delete(P) under tenant id format %q: %v", PermissiveFormat, err)
	}
	if resp.DeletedCount != seeded {
		t.Errorf("Delete(%q) = %d, want %d", id, resp.DeletedCount, seeded)
	}
	k.w.forget(id)
	k.w.unchanged(t, fmt.Sprintf("Delete(%q) under tenant id format %q", id, PermissiveFormat), k.w.ids[0])
	if len(p.victims) > 0 {
		p.deleteVictims(t)
	}
}
