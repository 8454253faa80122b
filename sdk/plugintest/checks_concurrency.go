package plugintest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lifecycled/lifecycled/sdk"
)

// concurrentTenants is how many Deletes the concurrency check runs at once:
// more than a plugin's connection pool holds (the bundled SQL deleters
// keep 4), as a daemon with max_jobs above it sends them.
const concurrentTenants = 9

// concurrent runs Deletes of several tenants at once through one plugin
// process, as the daemon does (deletion.max_jobs), and checks that every
// one finishes with its count and nothing of anyone else changes. A Delete
// that holds one pooled connection for its whole run (its proof's
// recorded identities) while it waits for another to delete lets as many
// Deletes as the pool holds take every connection, then all wait forever.
func (k *kit) concurrent(t *testing.T) {
	ids := make([]string, concurrentTenants)
	seeded := map[string]int64{}
	for i := range ids {
		ids[i] = k.o.NewTenantID()
		seeded[ids[i]] = k.o.Fixture.Seed(t, ids[i], k.o.Seed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), k.o.ConcurrentWithin)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(ids))
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := k.d.Delete(ctx, &sdk.DeleteRequest{TenantID: id}, nil)
			switch {
			case err != nil:
				errs[i] = err
			case resp.DeletedCount != seeded[id]:
				errs[i] = fmt.Errorf("deleted %d, want %d", resp.DeletedCount, seeded[id])
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Delete of tenant %d of %d running at once: %v", i+1, len(ids), err)
		}
	}
	// The plugin sees the deadline too (gRPC carries it), and may answer
	// a Delete that waited until then a moment before this side's context
	// ends (CI saw it): a Delete that ended within a second (a tenth of a
	// short budget) of the deadline did not finish within it either.
	deadline, _ := ctx.Deadline()
	if ctx.Err() != nil || time.Until(deadline) < min(time.Second, k.o.ConcurrentWithin/10) {
		t.Errorf("%d Deletes at once did not all finish within %s: the plugin deadlocks on its own resources; "+
			"a Delete that holds a pooled connection while it waits for another needs fewer Deletes at once than the pool has connections", len(ids), k.o.ConcurrentWithin)
	}
	for _, id := range ids {
		if n := k.o.Fixture.Remaining(t, id); n != 0 {
			t.Errorf("tenant %q still has %d items after its Delete", id, n)
		}
	}
	k.w.unchanged(t, fmt.Sprintf("%d Deletes at once", len(ids)))
}
