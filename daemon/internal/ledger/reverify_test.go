package ledger_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/ledger"
	"github.com/lifecycled/lifecycled/daemon/internal/periodic"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/migrations"
	"github.com/lifecycled/lifecycled/sdk"
)

const deleterName = "postgres:items"

// pgItems is a deleter whose store is a real PostgreSQL table, behind the
// plugin interface; it records when each Count reached the store.
type pgItems struct {
	pool   *pgxpool.Pool
	mu     sync.Mutex
	counts []time.Time
}

func newPGItems(t *testing.T) *pgItems {
	t.Helper()
	ctx := testsvc.Context(t, time.Minute)
	pool, err := pgxpool.New(ctx, testsvc.PGDatabase(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(ctx, `CREATE TABLE items (id bigserial PRIMARY KEY, tenant_id text NOT NULL, payload bytea NOT NULL)`)
	require.NoError(t, err)
	return &pgItems{pool: pool}
}

func (p *pgItems) DeleterNames() []string { return []string{deleterName} }

func (p *pgItems) Deleter(string) (sdk.TenantDeleter, error) { return p, nil }

func (p *pgItems) Configure(context.Context, *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	return &sdk.ConfigureResponse{}, nil
}

func (p *pgItems) Count(ctx context.Context, req *sdk.CountRequest) (*sdk.CountResponse, error) {
	p.mu.Lock()
	p.counts = append(p.counts, time.Now())
	p.mu.Unlock()
	var n int64
	if err := p.pool.QueryRow(ctx, `SELECT count(*) FROM items WHERE tenant_id = $1`, req.TenantID).Scan(&n); err != nil {
		return nil, sdk.Retryable(err, 0)
	}
	return &sdk.CountResponse{Count: n, Breakdown: map[string]int64{"items": n}}, nil
}

func (p *pgItems) Delete(ctx context.Context, req *sdk.DeleteRequest, _ sdk.Progress) (*sdk.DeleteResponse, error) {
	tag, err := p.pool.Exec(ctx, `DELETE FROM items WHERE tenant_id = $1`, req.TenantID)
	if err != nil {
		return nil, sdk.Retryable(err, 0)
	}
	return &sdk.DeleteResponse{DeletedCount: tag.RowsAffected()}, nil
}

func (p *pgItems) seed(t *testing.T, tenant string, n int) {
	t.Helper()
	_, err := p.pool.Exec(testsvc.Context(t, time.Minute),
		`INSERT INTO items (tenant_id, payload) SELECT $1, decode(md5(g::text), 'hex') FROM generate_series(1, $2) g`, tenant, n)
	require.NoError(t, err)
}

func (p *pgItems) countTimes() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := append([]time.Time(nil), p.counts...)
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// worstExcess is the most that any window [times[i], times[j]] holds
// beyond what rate allows in it: j-i+1 - rate*(t_j - t_i). A token bucket
// with burst b keeps it at or below b.
func worstExcess(times []time.Time, rate float64) float64 {
	worst := 0.0
	for i := range times {
		for j := i; j < len(times); j++ {
			if ex := float64(j-i+1) - rate*times[j].Sub(times[i]).Seconds(); ex > worst {
				worst = ex
			}
		}
	}
	return worst
}

type fixture struct {
	st      store.Store
	items   *pgItems
	prom    *prometheus.Registry
	kicks   atomic.Int64
	cfg     atomic.Pointer[ledger.ReverifyConfig]
	counter *deletion.Registry
}

func newFixture(t *testing.T, st store.Store, items *pgItems, cfg ledger.ReverifyConfig) *fixture {
	f := &fixture{st: st, items: items, prom: prometheus.NewRegistry(), counter: deletion.NewRegistry(items, func() int { return 2 })}
	f.cfg.Store(&cfg)
	return f
}

func (f *fixture) reverifier(owner string) *ledger.Reverifier {
	return ledger.NewReverifier(f.st, f.counter, owner, func() ledger.ReverifyConfig { return *f.cfg.Load() },
		func() { f.kicks.Add(1) }, hclog.NewNullLogger(), f.prom, nil)
}

func importTenants(t *testing.T, ctx context.Context, st store.Store, tenants []string) map[string]ledger.Entry {
	t.Helper()
	out := map[string]ledger.Entry{}
	var entries []ledger.Entry
	for i, tn := range tenants {
		e := ledger.Entry{TenantID: tn, JobID: uuid.New(), ErasedAt: t0.Add(time.Duration(i) * time.Second),
			ReceiptSHA256: ledger.ReceiptHash([]byte("receipt of " + tn))}
		entries = append(entries, e)
		out[tn] = e
	}
	added, err := st.ImportLedger(ctx, entries, t0)
	require.NoError(t, err)
	require.Equal(t, len(tenants), added)
	return out
}

// TestReverifyThousandTenantsWithinRate: a pass over 1,000 ledger tenants
// counts each once in a real PostgreSQL store, finds the two whose rows
// are back (and only them), counts each resurrection once in the metric,
// and never counts faster than the rate: over every window the counts
// that reached the store exceed rate*window by at most the bucket's burst.
func TestReverifyThousandTenantsWithinRate(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, st store.Store) {
		items := newPGItems(t)
		tenants := make([]string, 1000)
		for i := range tenants {
			tenants[i] = uuid.NewString()
		}
		importTenants(t, ctx, st, tenants)
		back := []string{tenants[17], tenants[923]}
		items.seed(t, back[0], 5)
		items.seed(t, back[1], 1)
		never := uuid.NewString() // not in the ledger: never counted, never touched
		items.seed(t, never, 9)

		const rate = 200.0
		f := newFixture(t, st, items, ledger.ReverifyConfig{Interval: time.Hour, Rate: rate, TenantIDFormat: "uuid"})
		v := f.reverifier("d1")
		start := time.Now()
		res, out, err := v.Pass(ctx)
		took := time.Since(start)
		require.NoError(t, err)
		require.Equal(t, periodic.Done, out)
		require.Equal(t, 1000, res.Checked)
		require.Equal(t, 2, res.Resurrected)
		require.Equal(t, 2, res.New)
		require.Zero(t, res.Reerased, "reerase is off")

		times := items.countTimes()
		require.Len(t, times, 1000, "one count per ledger tenant")
		burst := float64(ledger.Burst(rate))
		excess := worstExcess(times, rate)
		measured := float64(len(times)-1) / times[len(times)-1].Sub(times[0]).Seconds()
		t.Logf("%s: 1000 tenants in %s; measured %.1f counts/s against a limit of %.0f/s (burst %.0f); worst window excess %.2f",
			st.Dialect(), took.Round(time.Millisecond), measured, rate, burst, excess)
		// The times are taken where a count reaches the store, a little
		// after the limiter let it go: scheduling can bring two of them
		// closer than their tokens were, by a fraction of a count (seen:
		// 0.05). One count of slack covers that and nothing more.
		require.LessOrEqual(t, excess, burst+1, "a window held more counts than rate*window + burst")
		require.Greater(t, worstExcess(burstOf(times[0], 100), rate), burst+1, "the check catches an unlimited burst")

		require.Equal(t, 2.0, testutil.ToFloat64(metric(t, f.prom)), "one per resurrected tenant")
		for _, tn := range back {
			rs, err := st.Resurrections(ctx, tn)
			require.NoError(t, err)
			require.Len(t, rs, 1)
			require.Equal(t, ledger.ActionReported, rs[0].Action)
		}
		rs, err := st.Resurrections(ctx, tenants[18])
		require.NoError(t, err)
		require.Empty(t, rs)

		// The next pass is not due; a forced one finds the same two
		// without counting them again in the metric.
		res, out, err = v.Pass(ctx)
		require.NoError(t, err)
		require.Equal(t, periodic.Skipped, out)
		require.Zero(t, res.Checked)
		v.Reverify()
		res, _, err = v.Pass(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, res.Resurrected)
		require.Zero(t, res.New)
		require.Equal(t, 2.0, testutil.ToFloat64(metric(t, f.prom)))
		var left int64
		require.NoError(t, items.pool.QueryRow(ctx, `SELECT count(*) FROM items WHERE tenant_id = $1`, never).Scan(&left))
		require.EqualValues(t, 9, left)
	})
}

func burstOf(at time.Time, n int) []time.Time {
	out := make([]time.Time, n)
	for i := range out {
		out[i] = at
	}
	return out
}

func metric(t *testing.T, reg *prometheus.Registry) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "lifecycled_erasure_resurrections_total" {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "deleter" && l.GetValue() == deleterName {
						return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "x"}, func() float64 { return m.GetCounter().GetValue() })
					}
				}
			}
		}
	}
	t.Fatalf("no lifecycled_erasure_resurrections_total{deleter=%q}", deleterName)
	return nil
}

// TestReverifyReerasesRespectsHoldsAndResolves: with reerase on, a
// resurrected tenant gets a job (the runner is kicked) and is skipped
// while that job is unfinished; a held one is reported only; once the job
// erased the rows, the next pass resolves the resurrection. A bystander's
// rows are unchanged throughout.
func TestReverifyReerasesRespectsHoldsAndResolves(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, st store.Store) {
		items := newPGItems(t)
		a, held, clean, bystander := uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString()
		led := importTenants(t, ctx, st, []string{a, held, clean})
		items.seed(t, a, 3)
		items.seed(t, held, 2)
		items.seed(t, bystander, 4)
		sum := func() string {
			var s string
			require.NoError(t, items.pool.QueryRow(ctx, `SELECT md5(string_agg(id::text || encode(payload, 'hex'), ',' ORDER BY id)) FROM items WHERE tenant_id = $1`, bystander).Scan(&s))
			return s
		}
		before := sum()
		_, _, err := st.PlaceHold(ctx, held, "subpoena", nil, t0)
		require.NoError(t, err)

		f := newFixture(t, st, items, ledger.ReverifyConfig{Interval: time.Hour, Rate: 1000, Reerase: true, TenantIDFormat: "uuid"})
		v := f.reverifier("d1")
		res, _, err := v.Pass(ctx)
		require.NoError(t, err)
		require.Equal(t, ledger.PassResult{Checked: 3, Resurrected: 2, New: 2, Reerased: 1}, res)
		require.EqualValues(t, 1, f.kicks.Load())
		job, err := st.LatestDeletionJob(ctx, a)
		require.NoError(t, err)
		require.Equal(t, deletion.JobPending, job.Status)
		ref, err := st.ReerasureOf(ctx, job.ID)
		require.NoError(t, err)
		require.Equal(t, led[a].JobID, ref.JobID)
		require.Equal(t, led[a].ReceiptSHA256, ref.ReceiptSHA256)
		_, err = st.LatestDeletionJob(ctx, held)
		require.Error(t, err, "no job for the held tenant")
		rs, err := st.Resurrections(ctx, held)
		require.NoError(t, err)
		require.Equal(t, ledger.ActionHeld, rs[0].Action)

		// While a's job is unfinished, a is not counted.
		v.Reverify()
		res, _, err = v.Pass(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, res.Busy)
		require.Equal(t, 2, res.Checked)

		// The runner runs the job with a real Runner over the same store.
		runner := deletion.NewRunner(st, f.counter, "runner", func() deletion.RunnerConfig {
			return deletion.RunnerConfig{PollInterval: 20 * time.Millisecond, Lease: 5 * time.Second, Verify: true, TenantIDFormat: "uuid", MaxJobs: 1,
				RetryPolicy: retryNow}
		}, hclog.NewNullLogger(), nil, nil)
		require.NoError(t, runner.Start(ctx))
		t.Cleanup(func() { _ = runner.Stop(context.Background()) })
		testsvc.Eventually(t, time.Minute, func() bool {
			j, err := st.LatestDeletionJob(ctx, a)
			return err == nil && j.Status == deletion.JobCompleted
		}, "the re-erase job completes")
		require.NoError(t, runner.Stop(ctx))

		v.Reverify()
		res, _, err = v.Pass(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, res.Resolved, "%+v", res)
		require.Equal(t, 1, res.Resurrected, "the held tenant still is")
		rs, err = st.Resurrections(ctx, a)
		require.NoError(t, err)
		require.NotNil(t, rs[0].ResolvedAt)
		require.Equal(t, before, sum(), "the bystander's rows are unchanged")
		entries, err := st.LedgerEntries(ctx)
		require.NoError(t, err)
		require.Len(t, entries, 4, "the re-erase job's verified erasure joined the ledger")
	})
}

// TestReverifyOnePassAcrossDaemons: two daemons on one PostgreSQL store
// start a pass at once; one runs it, the other skips, and every ledger
// tenant is counted once.
func TestReverifyOnePassAcrossDaemons(t *testing.T) {
	dsn := storetest.DSN(t, migrations.Postgres)
	st1, st2 := storetest.OpenDSN(t, migrations.Postgres, dsn), storetest.OpenDSN(t, migrations.Postgres, dsn)
	ctx := testsvc.Context(t, 2*time.Minute)
	items := newPGItems(t)
	tenants := make([]string, 50)
	for i := range tenants {
		tenants[i] = uuid.NewString()
	}
	importTenants(t, ctx, st1, tenants)
	cfg := ledger.ReverifyConfig{Interval: time.Hour, Rate: 200, TenantIDFormat: "uuid", Lease: time.Minute}
	v1 := newFixture(t, st1, items, cfg).reverifier("d1")
	v2 := newFixture(t, st2, items, cfg).reverifier("d2")
	var wg sync.WaitGroup
	results := make([]ledger.PassResult, 2)
	outs := make([]periodic.Outcome, 2)
	for i, v := range []*ledger.Reverifier{v1, v2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			results[i], outs[i], err = v.Pass(ctx)
			require.NoError(t, err)
		}()
	}
	wg.Wait()
	require.ElementsMatch(t, []periodic.Outcome{periodic.Done, periodic.Skipped}, outs, fmt.Sprint(results))
	require.Equal(t, 50, results[0].Checked+results[1].Checked)
	require.Len(t, items.countTimes(), 50, "each tenant counted once across both daemons")
}
