package searchindex_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/searchindex"
	"github.com/lifecycled/lifecycled/daemon/internal/periodic"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
)

// TestSearchIndexerCatchesUpAndReportsItsQueue: the running indexer
// indexes what intake stored, more than one batch, reports the queue on
// its gauge and its passes as a periodic job, and a message is found by q
// throughout.
func TestSearchIndexerCatchesUpAndReportsItsQueue(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, st store.Store) {
		var batch []dlq.Incoming
		for i := 0; i < 2500; i++ {
			batch = append(batch, dlq.Incoming{
				Position:      dlq.LogPosition("kafka", "ix.dlq.v1", 0, int64(i)),
				OriginalTopic: "ix.events.v1", ErrorMessage: fmt.Sprintf("boom %d", i%5),
				Payload: []byte(fmt.Sprintf(`{"order":"IX-%05d"}`, i)),
			})
		}
		res, err := st.IngestDLQ(ctx, batch, dlq.IngestOptions{Now: time.Now(), MaxRetries: 3})
		require.NoError(t, err)
		require.Equal(t, 2500, res.Inserted)

		find := func() []dlq.Message {
			p, err := st.SearchDLQ(ctx, dlq.SearchFilter{Text: "ix-01234", Limit: 10})
			require.NoError(t, err)
			return p.Messages
		}
		require.Len(t, find(), 1, "found before it is indexed")

		reg := prometheus.NewRegistry()
		pm := periodic.New(reg)
		ix := searchindex.New(st, hclog.NewNullLogger(), reg, pm)
		require.NoError(t, ix.Start(ctx))
		t.Cleanup(func() { _ = ix.Stop(context.Background()) })
		for {
			n, err := testutil.GatherAndCount(reg, "lifecycled_periodic_last_success_timestamp_seconds")
			require.NoError(t, err)
			if n > 0 {
				v, err := gaugeValue(reg, "lifecycled_dlq_search_unindexed")
				require.NoError(t, err)
				if v == 0 {
					break
				}
			}
			require.NoError(t, ctx.Err(), "the indexer never caught up")
			time.Sleep(20 * time.Millisecond)
		}
		require.NoError(t, ix.Stop(ctx))
		require.NoError(t, ix.Stop(ctx), "a second stop is fine")
		done, waiting, err := ix.RunOnce(ctx)
		require.NoError(t, err)
		require.Zero(t, done)
		require.Zero(t, waiting)
		require.Len(t, find(), 1, "found once indexed")
	})
}

func gaugeValue(reg *prometheus.Registry, name string) (float64, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue(), nil
		}
	}
	return -1, fmt.Errorf("no gauge %s", name)
}

// fakeIndexStore is a queue: arrive adds to it, each index call takes a
// batch of up to 100.
type fakeIndexStore struct {
	waiting int64
	batches int
}

func (f *fakeIndexStore) UnindexedDLQ(context.Context) (int64, error) { return f.waiting, nil }

func (f *fakeIndexStore) IndexDLQSearch(context.Context) (int, int64, error) {
	n := min(f.waiting, 100)
	f.waiting -= n
	f.batches++
	return int(n), f.waiting, nil
}

// TestSearchIndexerDefersToIntake: while messages keep arriving the
// indexer indexes one batch per SearchIndexMaxDefer; once they stop it
// indexes batch after batch until the queue is empty.
func TestSearchIndexerDefersToIntake(t *testing.T) {
	ctx := context.Background()
	st := &fakeIndexStore{waiting: 1000}
	ix := searchindex.New(st, hclog.NewNullLogger(), nil, nil)
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }

	out, err := searchindex.Pass(ctx, ix, clock)
	require.NoError(t, err)
	require.Equal(t, periodic.More, out, "no arrivals seen yet: index")
	require.Equal(t, 1, st.batches)

	// A storm: more arrive before every pass.
	for i := 0; i < 9; i++ {
		st.waiting += 500
		now = now.Add(time.Second)
		out, err = searchindex.Pass(ctx, ix, clock)
		require.NoError(t, err)
		require.Equal(t, periodic.Done, out)
		require.Equal(t, 1, st.batches, "pass %d: deferred to intake", i)
	}
	st.waiting += 500
	now = now.Add(searchindex.MaxDefer)
	_, err = searchindex.Pass(ctx, ix, clock)
	require.NoError(t, err)
	require.Equal(t, 2, st.batches, "one batch after deferring for SearchIndexMaxDefer")

	// The storm is over: batch after batch until none waits.
	for st.waiting > 0 {
		require.Less(t, st.batches, 200)
		now = now.Add(time.Second)
		_, err = searchindex.Pass(ctx, ix, clock)
		require.NoError(t, err)
	}
	out, err = searchindex.Pass(ctx, ix, clock)
	require.NoError(t, err)
	require.Equal(t, periodic.Done, out)
	batches := st.batches
	_, err = searchindex.Pass(ctx, ix, clock)
	require.NoError(t, err)
	require.Equal(t, batches, st.batches, "nothing waits: nothing indexed")
}
