package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
)

// searchFixture stores a mixed set of dead letters across three DLQ
// topics: different errors (two groups on orders), keys, headers (binary
// ones too), payloads (JSON, text, binary), times and statuses.
func searchFixture(t *testing.T, s store.Store) {
	t.Helper()
	var batch []dlq.Incoming
	for i := 0; i < 30; i++ {
		in := incoming("orders.dlq.v1", int64(i), fmt.Sprintf(`{"order_id":"ORD-%04d","note":"Überweisung %d"}`, i, i))
		in.Key = []byte(fmt.Sprintf("order-%d", i))
		if i%2 == 0 {
			in.ErrorMessage = fmt.Sprintf("dial tcp 10.0.0.%d:5432: connect: connection refused", i)
		} else {
			in.ErrorMessage = fmt.Sprintf(`ERROR: duplicate key value violates unique constraint "orders_pkey" DETAIL: Key (id)=(%d) already exists.`, i)
		}
		in.Headers = []dlq.Header{{Key: []byte("error"), Value: []byte(in.ErrorMessage)}, {Key: []byte("tenant"), Value: []byte(fmt.Sprintf("t%d", i%3))},
			{Key: []byte("bin"), Value: []byte{0xff, 0x00, byte(i)}}}
		batch = append(batch, in)
	}
	ingest(t, s, t0, batch[:10]...)
	ingest(t, s, t0.Add(time.Minute), batch[10:20]...)
	ingest(t, s, t0.Add(2*time.Minute), batch[20:]...)
	pay := incoming("payments.dlq.v1", 0, "plain text MiXeD Case 100% _under_")
	pay.OriginalTopic = "payments.events.v1"
	pay.ErrorMessage = "HTTP 503 Service Unavailable"
	pay.Key = nil
	bin := incoming("payments.dlq.v1", 1, "\xff\x00binary\xfe")
	bin.OriginalTopic = "payments.events.v1"
	bin.ErrorMessage = "HTTP 404 Not Found"
	// A DLQ topic named as another topic's original topic: searched by
	// that name it is found once, whichever column matched.
	self := incoming("orders.events.v1", 0, `{"x":1}`)
	self.OriginalTopic = "orders.dlq.v1"
	ingest(t, s, t0.Add(3*time.Minute), pay, bin, self)
}

func search(t *testing.T, s store.Store, f dlq.SearchFilter) dlq.SearchPage {
	t.Helper()
	if f.Limit == 0 {
		f.Limit = 1000
	}
	p, err := s.SearchDLQ(ctx(t), f)
	require.NoError(t, err)
	return p
}

func offsets(p dlq.SearchPage) []string {
	var out []string
	for _, m := range p.Messages {
		out = append(out, fmt.Sprintf("%s/%d", m.Position.Topic, m.Position.Offset()))
	}
	return out
}

func TestSearchFiltersCombine(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		searchFixture(t, s)
		all := search(t, s, dlq.SearchFilter{})
		require.Len(t, all.Messages, 33)
		require.EqualValues(t, 33, all.Total)
		require.False(t, all.TotalIsEstimate)
		require.Nil(t, all.Next)

		// Topic: the DLQ topic or the original topic.
		p := search(t, s, dlq.SearchFilter{Topic: "payments.events.v1"})
		require.Equal(t, []string{"payments.dlq.v1/1", "payments.dlq.v1/0"}, offsets(p), "newest first, id breaks the tie")
		p = search(t, s, dlq.SearchFilter{Topic: "orders.dlq.v1"})
		require.Len(t, p.Messages, 31, "30 read from it plus the one naming it as original topic")
		require.EqualValues(t, 31, p.Total)

		// Error: substring, case ignored; group: the same failure.
		p = search(t, s, dlq.SearchFilter{Error: "CONNECTION REFUSED"})
		require.Len(t, p.Messages, 15)
		g := p.Messages[0].Group
		require.True(t, dlq.ValidGroupID(g))
		for _, m := range p.Messages {
			require.Equal(t, g, m.Group, "one failure, one group: %s", m.ErrorMessage)
		}
		pg := search(t, s, dlq.SearchFilter{Group: g})
		require.Len(t, pg.Messages, 15)
		require.EqualValues(t, 15, pg.Total)
		p = search(t, s, dlq.SearchFilter{Error: "100%"})
		require.Empty(t, p.Messages, "%% is a character, not a wildcard")

		// Key, header name, header name=value.
		p = search(t, s, dlq.SearchFilter{Key: ptr("order-7")})
		require.Equal(t, []string{"orders.dlq.v1/7"}, offsets(p))
		p = search(t, s, dlq.SearchFilter{Headers: []dlq.HeaderFilter{{Name: "tenant"}}})
		require.Len(t, p.Messages, 30)
		p = search(t, s, dlq.SearchFilter{Headers: []dlq.HeaderFilter{{Name: "tenant", Value: ptr("t1")}}, Error: "duplicate"})
		require.Len(t, p.Messages, 5, "odd offsets with i%%3 == 1: 1, 7, 13, 19, 25")
		p = search(t, s, dlq.SearchFilter{Headers: []dlq.HeaderFilter{{Name: "Tenant"}}})
		require.Empty(t, p.Messages, "header names are compared exactly, as Kafka does")

		// q: payload text, case ignored, JSON or not, non-ASCII, LIKE metacharacters.
		p = search(t, s, dlq.SearchFilter{Text: "ord-0012"})
		require.Equal(t, []string{"orders.dlq.v1/12"}, offsets(p))
		p = search(t, s, dlq.SearchFilter{Text: "mixed case 100% _under_"})
		require.Equal(t, []string{"payments.dlq.v1/0"}, offsets(p))
		p = search(t, s, dlq.SearchFilter{Text: "binary"})
		require.Equal(t, []string{"payments.dlq.v1/1"}, offsets(p))
		p = search(t, s, dlq.SearchFilter{Text: "Überweisung 29"})
		require.Equal(t, []string{"orders.dlq.v1/29"}, offsets(p))
		p = search(t, s, dlq.SearchFilter{Text: "100%x"})
		require.Empty(t, p.Messages)

		// since/until on created_at; statuses.
		since, until := t0.Add(time.Minute), t0.Add(2*time.Minute)
		p = search(t, s, dlq.SearchFilter{Since: &since, Until: &until})
		require.Len(t, p.Messages, 10)
		p = search(t, s, dlq.SearchFilter{Statuses: []dlq.Status{dlq.StatusDead, dlq.StatusResolved}})
		require.Empty(t, p.Messages)
		require.EqualValues(t, 0, p.Total)
	})
}

func ptr[T any](v T) *T { return &v }

func TestSearchKeysetPagingBothOrders(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		searchFixture(t, s)
		for _, oldest := range []bool{false, true} {
			var seen []string
			f := dlq.SearchFilter{Topic: "orders.dlq.v1", Limit: 7, OldestFirst: oldest}
			pages := 0
			for {
				p := search(t, s, f)
				pages++
				require.EqualValues(t, 31, p.Total)
				seen = append(seen, offsets(p)...)
				for i := 1; i < len(p.Messages); i++ {
					a, b := p.Messages[i-1], p.Messages[i]
					if oldest {
						require.False(t, b.CreatedAt.Before(a.CreatedAt))
					} else {
						require.False(t, b.CreatedAt.After(a.CreatedAt))
					}
				}
				if p.Next == nil {
					break
				}
				f.After = p.Next
			}
			require.Equal(t, 5, pages)
			require.Len(t, seen, 31)
			uniq := map[string]bool{}
			for _, o := range seen {
				require.False(t, uniq[o], "%s on two pages", o)
				uniq[o] = true
			}
		}
	})
}

func TestSearchIncludesArchivedOnlyWhenAsked(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		searchFixture(t, s)
		m := search(t, s, dlq.SearchFilter{Key: ptr("order-3")}).Messages[0]
		resolve(t, s, m.ID, t0.Add(time.Hour))
		// PostgreSQL's updated_at trigger may stamp the real clock on the
		// finish (claim and finish at the same instant): a cutoff after both.
		n, err := s.ArchiveDLQBatch(ctx, time.Now().Add(time.Hour), 100)
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		require.Empty(t, search(t, s, dlq.SearchFilter{Key: ptr("order-3")}).Messages)
		p := search(t, s, dlq.SearchFilter{Key: ptr("order-3"), IncludeArchived: true})
		require.Len(t, p.Messages, 1)
		require.True(t, p.Messages[0].Archived)
		require.Equal(t, m.ID, p.Messages[0].ID)
		require.Equal(t, m.Group, p.Messages[0].Group, "the group moves to the archive with the row")
		require.Equal(t, m.Payload, p.Messages[0].Payload)
		p = search(t, s, dlq.SearchFilter{Topic: "orders.dlq.v1", IncludeArchived: true, Text: "ORD-000"})
		require.Len(t, p.Messages, 10)
		require.EqualValues(t, 10, p.Total)
	})
}

func TestGroupsCountByStatusAndTopic(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		searchFixture(t, s)
		gs, err := s.DLQGroups(ctx, dlq.GroupFilter{Sort: dlq.GroupsByCount, Limit: 50})
		require.NoError(t, err)
		// orders: refused (15), duplicate (15); payments: 503, 404; the self-named one.
		require.Len(t, gs, 5)
		require.EqualValues(t, 15, gs[0].Counts[dlq.StatusPending])
		require.EqualValues(t, 15, gs[1].Counts[dlq.StatusPending])
		require.Equal(t, []string{"orders.events.v1"}, gs[0].OriginalTopics)
		require.Equal(t, []string{"orders.dlq.v1"}, gs[0].DLQTopics)
		require.True(t, gs[0].FirstSeen.Equal(t0))
		require.True(t, gs[0].LastSeen.Equal(t0.Add(2*time.Minute)))
		require.NotEmpty(t, gs[0].SampleError)
		require.Contains(t, []string{"dial tcp <ip>:<n>: connect: connection refused",
			`ERROR: duplicate key value violates unique constraint "<v>" DETAIL: Key (id)=(<v>) already exists.`}, gs[0].Pattern)

		// A status change moves the count; a delete removes it.
		refused := search(t, s, dlq.SearchFilter{Error: "refused"}).Messages
		resolve(t, s, refused[0].ID, t0.Add(time.Hour))
		require.NoError(t, s.DeleteDLQ(ctx, refused[1].ID))
		gs, err = s.DLQGroups(ctx, dlq.GroupFilter{Topic: "orders.dlq.v1", Sort: dlq.GroupsByCount, Limit: 50})
		require.NoError(t, err)
		var g dlq.GroupSummary
		for _, x := range gs {
			if x.ID == refused[0].Group {
				g = x
			}
		}
		require.EqualValues(t, 13, g.Counts[dlq.StatusPending])
		require.EqualValues(t, 1, g.Counts[dlq.StatusResolved])

		// Sort by recency; filter by status; limit.
		gs, err = s.DLQGroups(ctx, dlq.GroupFilter{Sort: dlq.GroupsByRecent, Limit: 2})
		require.NoError(t, err)
		require.Len(t, gs, 2)
		require.True(t, gs[0].LastSeen.Equal(t0.Add(3*time.Minute)))
		gs, err = s.DLQGroups(ctx, dlq.GroupFilter{Statuses: []dlq.Status{dlq.StatusResolved}, Sort: dlq.GroupsByCount, Limit: 50})
		require.NoError(t, err)
		require.Len(t, gs, 1)
		require.Equal(t, refused[0].Group, gs[0].ID)
		require.EqualValues(t, 1, gs[0].Counts[dlq.StatusResolved])
		require.EqualValues(t, 0, gs[0].Counts[dlq.StatusPending], "only the statuses asked for are counted")
		gs, err = s.DLQGroups(ctx, dlq.GroupFilter{Topic: "nothing.here", Sort: dlq.GroupsByCount, Limit: 50})
		require.NoError(t, err)
		require.Empty(t, gs)
	})
}

func TestGroupsBackfillOldRowsLeavesEverythingElse(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		searchFixture(t, s)
		before := search(t, s, dlq.SearchFilter{}).Messages
		// Rows from before migration 010: no group, counted under "".
		exec(t, s, `DELETE FROM dlq.dlq_failure_groups WHERE id IN (SELECT failure_group FROM dlq.dlq_messages WHERE dlq_topic = 'orders.dlq.v1')`,
			`DELETE FROM dlq_failure_groups WHERE id IN (SELECT failure_group FROM dlq_messages WHERE dlq_topic = 'orders.dlq.v1')`)
		exec(t, s, `UPDATE dlq.dlq_messages SET failure_group = '', updated_at = updated_at + interval '1 microsecond' WHERE dlq_topic = 'orders.dlq.v1'`,
			`UPDATE dlq_messages SET failure_group = '' WHERE dlq_topic = 'orders.dlq.v1'`)
		n, err := s.BackfillDLQGroups(ctx, 20)
		require.NoError(t, err)
		require.Equal(t, 20, n)
		n, err = s.BackfillDLQGroups(ctx, 20)
		require.NoError(t, err)
		require.Equal(t, 10, n)
		n, err = s.BackfillDLQGroups(ctx, 20)
		require.NoError(t, err)
		require.Zero(t, n)
		after := search(t, s, dlq.SearchFilter{}).Messages
		require.Equal(t, len(before), len(after))
		for i := range before {
			a, b := before[i], after[i]
			require.Equal(t, a.ID, b.ID)
			require.Equal(t, a.Group, b.Group, "the backfill computes what intake did")
			require.Equal(t, a.Payload, b.Payload)
			require.Equal(t, a.Status, b.Status)
			require.Equal(t, a.Headers, b.Headers)
			require.WithinDuration(t, a.UpdatedAt, b.UpdatedAt, time.Millisecond, "retention goes by updated_at")
		}
		gs, err := s.DLQGroups(ctx, dlq.GroupFilter{Topic: "orders.dlq.v1", Sort: dlq.GroupsByCount, Limit: 50})
		require.NoError(t, err)
		require.Len(t, gs, 3, "refused, duplicate and the self-named one")
		require.EqualValues(t, 15, gs[0].Counts[dlq.StatusPending]+gs[0].Counts[dlq.StatusResolved])
		require.Zero(t, count(t, s, `SELECT COALESCE(sum(n), 0)::int FROM dlq.dlq_group_counts WHERE group_id = ''`,
			`SELECT COALESCE(sum(n), 0) FROM dlq_group_counts WHERE group_id = ''`))
	})
}

// TestSearchFindsTextInLargePayloads: text deep in a large payload (over
// 4 KiB) is found by q, and a search does not confuse it with the small
// ones.
func TestSearchFindsTextInLargePayloads(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		big := strings.Repeat("filler text ", 1000) + "needle-in-a-large-payload"
		require.Greater(t, len(big), 4096)
		ingest(t, s, t0, incoming("big.dlq.v1", 0, big), incoming("big.dlq.v1", 1, "small needle-in-a-small-payload"))
		require.Equal(t, []string{"big.dlq.v1/0"}, offsets(search(t, s, dlq.SearchFilter{Text: "NEEDLE-IN-A-LARGE"})))
		require.Equal(t, []string{"big.dlq.v1/1"}, offsets(search(t, s, dlq.SearchFilter{Text: "needle-in-a-small"})))
		require.Len(t, search(t, s, dlq.SearchFilter{Text: "needle-in-a"}).Messages, 2)
		require.Len(t, search(t, s, dlq.SearchFilter{Text: "filler text"}).Messages, 1)
	})
}
