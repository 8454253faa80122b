package deletion_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lifecycled/lifecycled/sdk"
)

// batchDeleter is an in-memory store behind the sdk interface that deletes
// the way the PostgreSQL plugin does: in batches, reporting progress after
// each, checking its context between batches (sdk.TenantDeleter's cancel
// contract) and, like a statement whose result is lost when the context
// ends, without reporting the batch it was deleting when stopped. It counts
// how many Deletes run at once across every tenant.
type batchDeleter struct {
	mu      sync.Mutex
	items   map[string]map[string]int64 // tenant -> table -> rows
	batch   int64
	pause   time.Duration
	running atomic.Int32
	maxRun  atomic.Int32
	batches atomic.Int64
	// countDelay slows every Count (nanoseconds): a store slow to answer.
	countDelay atomic.Int64
	// slowStop, when set (before the deleter is used), keeps a stopped
	// Delete from returning until it is closed: a plugin slow to stop.
	// stopSeen says a Delete saw its context end.
	slowStop chan struct{}
	stopSeen atomic.Bool
}

func newBatchDeleter(batch int64, pause time.Duration) *batchDeleter {
	return &batchDeleter{items: map[string]map[string]int64{}, batch: batch, pause: pause}
}

func (b *batchDeleter) seed(tenant string, tables map[string]int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.items[tenant] = tables
}

func (b *batchDeleter) left(tenant string) map[string]int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int64{}
	for k, v := range b.items[tenant] {
		out[k] = v
	}
	return out
}

func (b *batchDeleter) Configure(context.Context, *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	return &sdk.ConfigureResponse{}, nil
}

func (b *batchDeleter) Count(_ context.Context, req *sdk.CountRequest) (*sdk.CountResponse, error) {
	time.Sleep(time.Duration(b.countDelay.Load()))
	b.mu.Lock()
	defer b.mu.Unlock()
	resp := &sdk.CountResponse{Breakdown: map[string]int64{}}
	for table, n := range b.items[req.TenantID] {
		resp.Breakdown[table] = n
		resp.Count += n
	}
	return resp, nil
}

func (b *batchDeleter) Delete(ctx context.Context, req *sdk.DeleteRequest, progress sdk.Progress) (*sdk.DeleteResponse, error) {
	n := b.running.Add(1)
	defer b.running.Add(-1)
	for cur := b.maxRun.Load(); n > cur && !b.maxRun.CompareAndSwap(cur, n); cur = b.maxRun.Load() {
	}
	resp := &sdk.DeleteResponse{Breakdown: map[string]int64{}}
	for {
		b.mu.Lock()
		table, have := "", int64(0)
		for t, rows := range b.items[req.TenantID] {
			if rows > 0 && (table == "" || t < table) {
				table, have = t, rows
			}
		}
		if table == "" {
			b.mu.Unlock()
			return resp, nil
		}
		take := min(have, b.batch)
		b.items[req.TenantID][table] -= take
		b.mu.Unlock()
		b.batches.Add(1)
		select {
		case <-ctx.Done():
			b.stopSeen.Store(true)
			if b.slowStop != nil {
				<-b.slowStop
			}
			// The batch is gone, but its result was lost with the context.
			return nil, sdk.PartialDeletion(resp.DeletedCount, fmt.Errorf("delete from %s: %w", table, ctx.Err()))
		case <-time.After(b.pause):
		}
		resp.DeletedCount += take
		resp.Breakdown[table] += take
		progress(resp.DeletedCount)
	}
}

type batchDeleters map[string]*batchDeleter

func (s batchDeleters) DeleterNames() []string {
	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (s batchDeleters) Deleter(name string) (sdk.TenantDeleter, error) {
	d, ok := s[name]
	if !ok {
		return nil, fmt.Errorf("no deleter %q", name)
	}
	return d, nil
}

func hclogNull() hclog.Logger { return hclog.NewNullLogger() }
