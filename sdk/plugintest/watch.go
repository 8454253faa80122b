package plugintest

import (
	"fmt"
	"slices"
	"testing"
)

// watch remembers the state of tenants whose data a call must not change,
// as the fixture's checksum (or, without one, its count) of each.
type watch struct {
	fx        DeleterFixture
	checksums bool
	ids       []string // in the order added: A, B, then the bystanders
	why       map[string]string
	before    map[string]snapshot
	gone      map[string]bool // deleted on purpose: no longer compared
}

type snapshot struct {
	sum   string
	items int64
}

func newWatch(_ testing.TB, o DeleterOptions) *watch {
	_, ok := o.Fixture.(DeleterChecksummer)
	return &watch{fx: o.Fixture, checksums: ok, why: map[string]string{}, before: map[string]snapshot{}, gone: map[string]bool{}}
}

func (w *watch) take(t testing.TB, id string) snapshot {
	s := snapshot{items: w.fx.Remaining(t, id)}
	if c, ok := w.fx.(DeleterChecksummer); ok {
		s.sum = c.Checksum(t, id)
	} else {
		s.sum = fmt.Sprintf("%d items", s.items)
	}
	return s
}

// distinct says whether the fixture's store keeps id apart from other ids.
func (w *watch) distinct(id string) bool {
	if d, ok := w.fx.(DistinctTenantIDs); ok {
		return d.StoresDistinct(id)
	}
	return true
}

func (w *watch) add(t testing.TB, id, why string) {
	w.ids = append(w.ids, id)
	w.why[id] = why
	w.before[id] = w.take(t, id)
}

// others lists the watched tenants but id.
func (w *watch) others(id string) []string {
	var out []string
	for _, x := range w.ids {
		if x != id {
			out = append(out, x)
		}
	}
	return out
}

func (w *watch) seeded(id string) bool {
	_, ok := w.before[id]
	return ok
}

// forget stops comparing a tenant that a check deleted on purpose.
func (w *watch) forget(id string) { w.gone[id] = true }

// unchanged fails t for every watched tenant but except whose data differs
// from when it was added.
func (w *watch) unchanged(t testing.TB, after string, except ...string) {
	t.Helper()
	for _, id := range w.ids {
		if w.gone[id] || slices.Contains(except, id) {
			continue
		}
		was, now := w.before[id], w.take(t, id)
		if was.sum == now.sum {
			continue
		}
		w.before[id] = now // report each change once
		t.Errorf("after %s, the data of %s changed (%d items before, %d now; checksum %s -> %s): "+
			"the deleter touched data that is not the requested tenant's. Match the tenant id exactly, byte for byte: "+
			"no case folding, trimming or prefix match; end it in a key or path with a byte no id can contain; "+
			"refuse an id that is not the canonical text of a numeric key",
			after, w.why[id], was.items, now.items, short(was.sum), short(now.sum))
	}
}

func short(s string) string {
	if len(s) > 16 {
		return s[:16] + "..."
	}
	return s
}
