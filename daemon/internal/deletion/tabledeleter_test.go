package deletion_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/lifecycled/lifecycled/sdk"
)

// tableDeleter is a store with tables behind the sdk interface: it reports
// breakdowns per table, can fail part way through a delete, can fail to
// count, and remembers every tenant id it was called with.
type tableDeleter struct {
	mu    sync.Mutex
	items map[string]map[string]int64 // tenant -> table -> items
	seen  []string
	// failAfter > 0: Delete removes that many items (table by table, in
	// name order) and then fails with a retryable error.
	failAfter int64
	// noDeleteBreakdown: Delete reports only its total (as the Redis
	// plugin did).
	noDeleteBreakdown bool
	// countErr, when set, decides per Count call (1, 2, ...) whether it fails.
	countErr func(call int) error
	counts   int
	// lieAfterDelete: Count after a Delete says 0 while its breakdown
	// shows what is left.
	lieAfterDelete bool
	deleted        bool
	// fingerprint, when set, makes Plan answer with a step per table
	// under it, and Delete refuse (sdk.PlanChanged, deleting nothing) a
	// plan fingerprint that is not it, as the SQL deleters do; unset, Plan
	// is unsupported. afterPlan, when set, runs after every Plan (a schema
	// change between the daemon's check and its Delete).
	fingerprint string
	afterPlan   func(d *tableDeleter)
	// deleteFingerprints are the PlanFingerprint of every Delete call.
	deleteFingerprints []string
}

func (d *tableDeleter) Plan(_ context.Context, req *sdk.PlanRequest) (*sdk.PlanResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fingerprint == "" {
		return nil, sdk.Unsupported(errors.New("this test deleter does not plan"))
	}
	resp := &sdk.PlanResponse{Fingerprint: d.fingerprint}
	for _, table := range slices.Sorted(maps.Keys(d.items[req.TenantID])) {
		resp.Steps = append(resp.Steps, sdk.PlanStep{Target: table, Via: "tenant column", Expected: d.items[req.TenantID][table]})
	}
	if d.afterPlan != nil {
		d.afterPlan(d)
	}
	return resp, nil
}

func tables(tenant string, t map[string]int64, others ...any) *tableDeleter {
	d := &tableDeleter{items: map[string]map[string]int64{tenant: t}}
	for i := 0; i < len(others); i += 2 {
		d.items[others[i].(string)] = others[i+1].(map[string]int64)
	}
	return d
}

func (d *tableDeleter) Configure(context.Context, *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	return &sdk.ConfigureResponse{}, nil
}

func (d *tableDeleter) Count(_ context.Context, req *sdk.CountRequest) (*sdk.CountResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seen = append(d.seen, req.TenantID)
	d.counts++
	if d.countErr != nil {
		if err := d.countErr(d.counts); err != nil {
			return nil, err
		}
	}
	resp := &sdk.CountResponse{Breakdown: map[string]int64{}}
	for table, n := range d.items[req.TenantID] {
		resp.Breakdown[table] = n
		resp.Count += n
	}
	if d.lieAfterDelete && d.deleted {
		resp.Count = 0
	}
	return resp, nil
}

func (d *tableDeleter) Delete(_ context.Context, req *sdk.DeleteRequest, progress sdk.Progress) (*sdk.DeleteResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seen = append(d.seen, req.TenantID)
	d.deleteFingerprints = append(d.deleteFingerprints, req.PlanFingerprint)
	if req.PlanFingerprint != "" && req.PlanFingerprint != d.fingerprint {
		return nil, sdk.PartialDeletion(0, sdk.PlanChanged(req.PlanFingerprint, d.fingerprint, []string{"new: table x"}))
	}
	d.deleted = true
	resp := &sdk.DeleteResponse{Breakdown: map[string]int64{}}
	names := make([]string, 0, len(d.items[req.TenantID]))
	for table := range d.items[req.TenantID] {
		names = append(names, table)
	}
	sort.Strings(names)
	for _, table := range names {
		n := d.items[req.TenantID][table]
		if d.failAfter > 0 {
			n = min(n, d.failAfter-resp.DeletedCount)
		}
		if d.lieAfterDelete {
			n = min(n, 1) // leaves items behind, says it succeeded
		}
		d.items[req.TenantID][table] -= n
		resp.Breakdown[table] += n
		resp.DeletedCount += n
		if d.failAfter > 0 && resp.DeletedCount == d.failAfter {
			progress(resp.DeletedCount)
			return nil, sdk.PartialDeletion(resp.DeletedCount, sdk.Retryable(errors.New("connection reset"), 0))
		}
	}
	progress(resp.DeletedCount)
	if d.noDeleteBreakdown {
		resp.Breakdown = nil
	}
	return resp, nil
}

func (d *tableDeleter) set(f func(d *tableDeleter)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f(d)
}

func (d *tableDeleter) left(tenant string) map[string]int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]int64{}
	for k, v := range d.items[tenant] {
		out[k] = v
	}
	return out
}

func (d *tableDeleter) tenantsSeen() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := slices.Clone(d.seen)
	sort.Strings(out)
	return slices.Compact(out)
}

// config is the configured deleters; a test may change it as a reload would.
type config struct {
	mu     sync.Mutex
	names  []string
	byName map[string]*tableDeleter
}

func configured(specs ...any) *config {
	c := &config{byName: map[string]*tableDeleter{}}
	for i := 0; i < len(specs); i += 2 {
		c.names = append(c.names, specs[i].(string))
		c.byName[specs[i].(string)] = specs[i+1].(*tableDeleter)
	}
	return c
}

func (c *config) DeleterNames() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.names)
}

func (c *config) Deleter(name string) (sdk.TenantDeleter, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Contains(c.names, name) {
		return nil, fmt.Errorf("no deleter %q is configured", name)
	}
	return c.byName[name], nil
}

func (d *tableDeleter) fingerprintsSeen() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.deleteFingerprints)
}
