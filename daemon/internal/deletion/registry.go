// Package deletion erases a departed tenant's data from every store. The
// Registry runs every configured deleter, in parallel up to a limit, and
// never stops at the first failure: its DeletionReport holds what each
// deleter deleted and what failed (seed 000, decision 4). Jobs make a
// deletion durable: they survive restarts, retry failed deleters with
// backoff, and are COMPLETED only when a count afterwards finds nothing left.
package deletion

import (
	"context"
	"sort"
	"sync"

	"github.com/lifecycled/lifecycled/sdk"
)

// Deleters is where the registry finds its deleters (the plugin host).
type Deleters interface {
	// DeleterNames lists configured deleters in config order.
	DeleterNames() []string
	Deleter(name string) (sdk.TenantDeleter, error)
}

// Result is one deleter's success.
type Result struct {
	DeletedCount int64 `json:"deleted_count"`
	// Breakdown is what was deleted per table, key pattern, ... (the keys
	// are the plugin's); empty when the plugin reports none.
	Breakdown map[string]int64 `json:"breakdown"`
	// Proof is what the deleter checked once its deletes were done (the
	// identities it recorded before them); absent from a deleter that
	// proves nothing of its own (sdk.Verifier).
	Proof []ProofCheck `json:"proof,omitempty"`
}

// Failure is one deleter's failure.
type Failure struct {
	Deleter string `json:"deleter"`
	Error   string `json:"error"`
	// Deleted is how much the deleter removed before failing.
	Deleted int64 `json:"-"`
	Err     error `json:"-"`
}

// DeletionReport is the outcome of running deleters: every deleter appears
// exactly once, in Succeeded or in Failed. It is returned without an error
// on purpose, so that callers must look at Failed.
type DeletionReport struct {
	Succeeded map[string]Result `json:"succeeded"`
	Failed    []Failure         `json:"failed"`
	// Verification is what the count after deleting found, per deleter;
	// absent until a job's verification ran.
	Verification map[string]Verification `json:"verification,omitempty"`
	// Cancelled is what each deleter a cancel stopped had deleted by then;
	// absent unless a cancel stopped one.
	Cancelled map[string]Result `json:"cancelled,omitempty"`
}

// CountReport is the outcome of counting with every deleter.
type CountReport struct {
	// TenantID is the canonical id that was counted.
	TenantID string
	Counts   map[string]int64
	// Breakdown holds each successful deleter's count per table, key
	// pattern, ... as the plugin reports it (an empty map when it does not).
	Breakdown map[string]map[string]int64
	Failed    []Failure
}

// Complete reports whether every deleter counted: otherwise Total leaves
// out what the failed ones would have found.
func (c CountReport) Complete() bool { return len(c.Failed) == 0 }

// Total sums the successful counts.
func (c CountReport) Total() int64 {
	var n int64
	for _, v := range c.Counts {
		n += v
	}
	return n
}

// Registry runs deleters.
type Registry struct {
	src         Deleters
	concurrency func() int
}

// NewRegistry returns a registry over src that runs up to concurrency()
// deleters at once.
func NewRegistry(src Deleters, concurrency func() int) *Registry {
	return &Registry{src: src, concurrency: concurrency}
}

// Names lists the configured deleters.
func (r *Registry) Names() []string { return r.src.DeleterNames() }

// DeleteSome runs the named deleters; progress, when set, receives each
// deleter's running count. fingerprints holds, by deleter, the fingerprint
// of the plan checked before this call, sent with its Delete (a deleter
// without one gets none and does not check).
func (r *Registry) DeleteSome(ctx context.Context, tenant string, names []string, fingerprints map[string]string, progress func(name string, deleted int64)) DeletionReport {
	report := DeletionReport{Succeeded: map[string]Result{}, Failed: []Failure{}}
	var mu sync.Mutex
	r.each(ctx, names, func(name string) {
		var (
			resp *sdk.DeleteResponse
			err  error
		)
		d, err := r.src.Deleter(name)
		if err == nil {
			resp, err = d.Delete(ctx, &sdk.DeleteRequest{TenantID: tenant, PlanFingerprint: fingerprints[name]}, func(n int64) {
				if progress != nil {
					progress(name, n)
				}
			})
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			deleted, _ := sdk.DeletedBefore(err)
			report.Failed = append(report.Failed, Failure{Deleter: name, Error: err.Error(), Deleted: deleted, Err: err})
			return
		}
		report.Succeeded[name] = Result{DeletedCount: resp.DeletedCount, Breakdown: copyBreakdown(resp.Breakdown), Proof: proofChecks(resp.Proof)}
	})
	sortFailures(report.Failed, names)
	return report
}

// CountAll counts with every configured deleter; failures are reported,
// not returned early (unlike the seed, which stopped at the first).
func (r *Registry) CountAll(ctx context.Context, tenant string) CountReport {
	return r.CountSome(ctx, tenant, r.src.DeleterNames())
}

// CountSome counts with the named deleters.
func (r *Registry) CountSome(ctx context.Context, tenant string, names []string) CountReport {
	report := CountReport{TenantID: tenant, Counts: map[string]int64{}, Breakdown: map[string]map[string]int64{}, Failed: []Failure{}}
	var mu sync.Mutex
	r.each(ctx, names, func(name string) {
		var resp *sdk.CountResponse
		d, err := r.src.Deleter(name)
		if err == nil {
			resp, err = d.Count(ctx, &sdk.CountRequest{TenantID: tenant})
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			report.Failed = append(report.Failed, Failure{Deleter: name, Error: err.Error(), Err: err})
			return
		}
		report.Counts[name] = resp.Count
		report.Breakdown[name] = copyBreakdown(resp.Breakdown)
	})
	sortFailures(report.Failed, names)
	return report
}

// each runs fn for every name, at most concurrency() at once.
func (r *Registry) each(ctx context.Context, names []string, fn func(name string)) {
	limit := 1
	if r.concurrency != nil && r.concurrency() > 1 {
		limit = r.concurrency()
	}
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(name)
		}()
	}
	wg.Wait()
}

// copyBreakdown returns a non-nil copy: the JSON shows {} rather than null,
// and no caller shares a map a plugin handed back.
func copyBreakdown(b map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(b))
	for k, v := range b {
		out[k] = v
	}
	return out
}

// sortFailures orders failures as the deleters are configured.
func sortFailures(f []Failure, order []string) {
	pos := map[string]int{}
	for i, n := range order {
		pos[n] = i
	}
	sort.SliceStable(f, func(i, j int) bool { return pos[f[i].Deleter] < pos[f[j].Deleter] })
}
