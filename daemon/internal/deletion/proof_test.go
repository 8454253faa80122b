package deletion_test

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/adminapi"
	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/migrations"
	"github.com/lifecycled/lifecycled/sdk"
)

// provingDeleter is a tableDeleter with an independent proof: its Verify
// also sees the rows of hidden tables, which its Count (the deletion's
// model) does not know, and its Delete reports the identities it
// recorded.
type provingDeleter struct {
	*tableDeleter
	mu     sync.Mutex
	hidden map[string]int64 // table -> the tenant's rows the model misses
	kept   int64            // the tenant's rows in a table kept on purpose
}

func (p *provingDeleter) Delete(ctx context.Context, req *sdk.DeleteRequest, progress sdk.Progress) (*sdk.DeleteResponse, error) {
	resp, err := p.tableDeleter.Delete(ctx, req, progress)
	if err != nil {
		return nil, err
	}
	resp.Proof = []sdk.ProofCheck{{Kind: sdk.ProofIdentities, Target: "public.t", Checked: resp.DeletedCount}}
	return resp, nil
}

func (p *provingDeleter) Verify(_ context.Context, req *sdk.VerifyRequest) (*sdk.VerifyResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	resp := &sdk.VerifyResponse{}
	for table, n := range p.tableDeleter.left(req.TenantID) {
		resp.Checks = append(resp.Checks, sdk.ProofCheck{Kind: sdk.ProofTenantItems, Target: table + ".tenant_id", Found: n})
	}
	for _, table := range slices.Sorted(maps.Keys(p.hidden)) {
		resp.Checks = append(resp.Checks, sdk.ProofCheck{Kind: sdk.ProofTenantItems, Target: table + ".Tenant_ID", Found: p.hidden[table]})
	}
	resp.Checks = append(resp.Checks, sdk.ProofCheck{Kind: sdk.ProofKept, Target: "public.audit.tenant_id", Found: p.kept})
	return resp, nil
}

// provers is a Deleters of proving deleters.
type provers map[string]sdk.TenantDeleter

func (p provers) DeleterNames() []string { return slices.Sorted(maps.Keys(p)) }
func (p provers) Deleter(name string) (sdk.TenantDeleter, error) {
	return p[name], nil
}

// A deleter with an independent proof is verified by it, not by its
// count: rows its model misses keep the job from completing even though
// its count says 0, and the job says which method was used and what each
// check found. What the config keeps on purpose is reported, not left.
func TestAnIndependentProofDecidesVerified(t *testing.T) {
	st := storetest.Open(t, migrations.SQLite)
	p := &provingDeleter{tableDeleter: tables(tenant, map[string]int64{"public.t": 4}), hidden: map[string]int64{"public.legacy": 2}, kept: 3}
	svc := run(t, st, provers{"postgres:app": p}, func(c *deletion.RunnerConfig) {
		c.RetryPolicy.Initial, c.RetryPolicy.Max = 2*time.Second, 2*time.Second
	})
	_, _, err := svc.StartDeletion(testsvc.Context(t, time.Minute), tenant, deletion.StartOptions{})
	require.NoError(t, err)
	partial := waitFor(t, st, tenant, func(j *deletion.Job) bool { return j.Status == deletion.JobPartial }, "the proof finds rows left")
	require.False(t, partial.Verified)
	require.Contains(t, partial.LastError, "postgres:app has 2 left by its independent proof (tenant_items public.legacy.Tenant_ID: 2)")
	v := adminapi.JobBody(partial).Report.Verification["postgres:app"]
	require.Equal(t, deletion.MethodIndependent, v.Method)
	require.EqualValues(t, 2, v.Count)
	require.Equal(t, map[string]int64{"tenant_items public.legacy.Tenant_ID": 2}, v.Breakdown)
	require.Contains(t, v.Checks, deletion.ProofCheck{Kind: "identities", Target: "public.t", Checked: 4})
	require.Contains(t, v.Checks, deletion.ProofCheck{Kind: "kept", Target: "public.audit.tenant_id", Found: 3})

	p.mu.Lock()
	p.hidden["public.legacy"] = 0
	p.mu.Unlock()
	done := waitFor(t, st, tenant, completed, "verified once nothing is left")
	require.True(t, done.Verified)
	v = adminapi.JobBody(done).Report.Verification["postgres:app"]
	require.Equal(t, deletion.MethodIndependent, v.Method)
	require.Zero(t, v.Count)
	require.Contains(t, v.Checks, deletion.ProofCheck{Kind: "kept", Target: "public.audit.tenant_id", Found: 3}, "kept rows do not stop verification")
}

// A deleter without a proof of its own is verified by its count, and the
// job says so.
func TestADeleterWithoutAProofIsVerifiedByCountAndSaysSo(t *testing.T) {
	st := storetest.Open(t, migrations.SQLite)
	svc := run(t, st, configured("redis:sessions", tables(tenant, map[string]int64{"session:{tenant}:*": 3})), nil)
	_, _, err := svc.StartDeletion(testsvc.Context(t, time.Minute), tenant, deletion.StartOptions{})
	require.NoError(t, err)
	done := waitFor(t, st, tenant, completed, "job completes")
	v := adminapi.JobBody(done).Report.Verification["redis:sessions"]
	require.Equal(t, deletion.MethodCount, v.Method)
	require.Empty(t, v.Checks)
}
