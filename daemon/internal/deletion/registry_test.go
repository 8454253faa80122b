package deletion_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
)

// memDeleter is an in-memory store behind the sdk interface: the registry's
// unit tests need deleters that fail on demand, as seed 000's MockDeleter did.
type memDeleter struct {
	mu      sync.Mutex
	items   map[string]int64
	fail    error // returned by Delete (after deleting failAfter items)
	failAt  int64
	calls   atomic.Int32
	running *atomic.Int32 // shared by the deleters of one test
	maxPar  *atomic.Int32
	delay   time.Duration
}

func (m *memDeleter) Configure(context.Context, *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	return &sdk.ConfigureResponse{}, nil
}

func (m *memDeleter) Count(_ context.Context, req *sdk.CountRequest) (*sdk.CountResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return &sdk.CountResponse{Count: m.items[req.TenantID]}, nil
}

func (m *memDeleter) Delete(ctx context.Context, req *sdk.DeleteRequest, progress sdk.Progress) (*sdk.DeleteResponse, error) {
	m.calls.Add(1)
	if m.maxPar != nil {
		n := m.running.Add(1)
		defer m.running.Add(-1)
		for {
			cur := m.maxPar.Load()
			if n <= cur || m.maxPar.CompareAndSwap(cur, n) {
				break
			}
		}
	}
	if m.delay > 0 {
		time.Sleep(m.delay)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	have := m.items[req.TenantID]
	if m.fail != nil {
		done := min(m.failAt, have)
		m.items[req.TenantID] = have - done
		progress(done)
		return nil, sdk.PartialDeletion(done, m.fail)
	}
	delete(m.items, req.TenantID)
	progress(have)
	return &sdk.DeleteResponse{DeletedCount: have}, nil
}

type memDeleters struct {
	names  []string
	byName map[string]*memDeleter
}

func (m *memDeleters) DeleterNames() []string { return m.names }
func (m *memDeleters) Deleter(name string) (sdk.TenantDeleter, error) {
	d, ok := m.byName[name]
	if !ok {
		return nil, fmt.Errorf("no deleter %q", name)
	}
	return d, nil
}

func newMem(specs ...any) *memDeleters {
	m := &memDeleters{byName: map[string]*memDeleter{}}
	for i := 0; i < len(specs); i += 2 {
		name := specs[i].(string)
		m.names = append(m.names, name)
		m.byName[name] = specs[i+1].(*memDeleter)
	}
	return m
}

func seeded(n int64, fail error) *memDeleter {
	return &memDeleter{items: map[string]int64{"t1": n, "t2": 7}, fail: fail, failAt: n / 2}
}

var errDown = sdk.Retryable(errors.New("connection refused"), 0)

func TestDeleteAllAllSucceed(t *testing.T) {
	src := newMem("postgres:workflows", seeded(3, nil), "redis:sessions", seeded(5, nil), "dynamodb:audit_logs", seeded(8, nil))
	report := deletion.NewRegistry(src, func() int { return 4 }).DeleteSome(testsvc.Context(t, time.Minute), "t1", src.names, nil, nil)
	require.Empty(t, report.Failed)
	require.Equal(t, map[string]deletion.Result{"postgres:workflows": res(3), "redis:sessions": res(5), "dynamodb:audit_logs": res(8)}, report.Succeeded)
	for _, name := range src.names {
		require.EqualValues(t, 7, src.byName[name].items["t2"], "other tenants untouched")
	}
}

func TestDeleteAllFirstFailsRestStillRun(t *testing.T) {
	src := newMem("a", seeded(4, errDown), "b", seeded(5, nil), "c", seeded(6, nil))
	report := deletion.NewRegistry(src, func() int { return 1 }).DeleteSome(testsvc.Context(t, time.Minute), "t1", src.names, nil, nil)
	require.NotEmpty(t, report.Failed)
	require.Len(t, report.Failed, 1)
	require.Equal(t, "a", report.Failed[0].Deleter)
	require.Contains(t, report.Failed[0].Error, "connection refused")
	require.EqualValues(t, 2, report.Failed[0].Deleted, "partial count kept")
	require.Equal(t, map[string]deletion.Result{"b": res(5), "c": res(6)}, report.Succeeded)
	require.EqualValues(t, 1, src.byName["c"].calls.Load())
}

func TestDeleteAllLastFailsEarlierResultsKept(t *testing.T) {
	src := newMem("a", seeded(4, nil), "b", seeded(5, nil), "c", seeded(6, errDown))
	report := deletion.NewRegistry(src, func() int { return 1 }).DeleteSome(testsvc.Context(t, time.Minute), "t1", src.names, nil, nil)
	require.NotEmpty(t, report.Failed)
	require.Equal(t, map[string]deletion.Result{"a": res(4), "b": res(5)}, report.Succeeded)
	require.Equal(t, "c", report.Failed[0].Deleter)
}

func TestDeleteAllAllFail(t *testing.T) {
	src := newMem("a", seeded(4, errDown), "b", seeded(5, errDown), "c", seeded(6, sdk.Permanent(errors.New("permission denied"))))
	report := deletion.NewRegistry(src, func() int { return 2 }).DeleteSome(testsvc.Context(t, time.Minute), "t1", src.names, nil, nil)
	require.Empty(t, report.Succeeded)
	require.Len(t, report.Failed, 3)
	var names []string
	for _, f := range report.Failed {
		names = append(names, f.Deleter)
	}
	require.Equal(t, []string{"a", "b", "c"}, names, "failures in config order")
}

func TestUnknownDeleterIsAFailureNotAPanic(t *testing.T) {
	src := newMem("a", seeded(1, nil))
	report := deletion.NewRegistry(src, nil).DeleteSome(testsvc.Context(t, time.Minute), "t1", []string{"a", "ghost"}, nil, nil)
	require.Equal(t, map[string]deletion.Result{"a": res(1)}, report.Succeeded)
	require.Equal(t, "ghost", report.Failed[0].Deleter)
}

func TestConcurrencyLimit(t *testing.T) {
	var maxPar, running atomic.Int32
	var specs []any
	for i := 0; i < 8; i++ {
		d := seeded(1, nil)
		d.maxPar, d.running, d.delay = &maxPar, &running, 30*time.Millisecond
		specs = append(specs, fmt.Sprint("d", i), d)
	}
	src := newMem(specs...)
	report := deletion.NewRegistry(src, func() int { return 3 }).DeleteSome(testsvc.Context(t, time.Minute), "t1", src.names, nil, nil)
	require.Len(t, report.Succeeded, 8)
	require.LessOrEqual(t, maxPar.Load(), int32(3))
	require.GreaterOrEqual(t, maxPar.Load(), int32(2), "deleters do run in parallel")
}

func TestCountAllReportsEveryFailure(t *testing.T) {
	src := newMem("a", seeded(4, nil), "b", seeded(5, nil))
	report := deletion.NewRegistry(src, nil).CountSome(testsvc.Context(t, time.Minute), "t1", []string{"a", "missing", "b", "gone"})
	require.Equal(t, map[string]int64{"a": 4, "b": 5}, report.Counts)
	var failed []string
	for _, f := range report.Failed {
		failed = append(failed, f.Deleter)
	}
	sort.Strings(failed)
	require.Equal(t, []string{"gone", "missing"}, failed)
	require.EqualValues(t, 9, report.Total())
}

// res is a success of a deleter that reports no breakdown.
func res(n int64) deletion.Result {
	return deletion.Result{DeletedCount: n, Breakdown: map[string]int64{}}
}
