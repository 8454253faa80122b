package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
)

func TestIngestIsIdempotentPerPosition(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		res := ingest(t, s, t0, incoming("orders.dlq.v1", 1, `{"order_id":"123"}`), incoming("orders.dlq.v1", 2, "not json \x00\xff"))
		require.Equal(t, dlq.IngestResult{Inserted: 2}, res)
		// Redelivery of the same positions (a crash before the commit).
		res = ingest(t, s, t0.Add(time.Second), incoming("orders.dlq.v1", 1, `{"order_id":"123"}`), incoming("orders.dlq.v1", 2, "x"), incoming("orders.dlq.v1", 3, "{}"))
		require.Equal(t, dlq.IngestResult{Inserted: 1, Duplicates: 2}, res)

		msgs, total, err := s.ListDLQ(ctx, dlq.ListFilter{Topic: "orders.dlq.v1", Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.EqualValues(t, 3, total)
		require.Len(t, msgs, 3)
		byOffset := map[int64]dlq.Message{}
		for _, m := range msgs {
			byOffset[m.Position.Offset()] = m
		}
		m := byOffset[2]
		require.Equal(t, []byte("not json \x00\xff"), m.Payload, "non-JSON payload kept byte for byte")
		require.Equal(t, dlq.StatusPending, m.Status)
		require.Equal(t, 0, m.RetryCount)
		require.Equal(t, 3, m.MaxRetries)
		require.Equal(t, "orders.events.v1", m.OriginalTopic)
		require.Equal(t, []byte("k1"), m.Key)
		require.Equal(t, []dlq.Header{{Key: []byte("error"), Value: []byte("processing failed")}}, m.Headers)
		require.True(t, m.CreatedAt.Equal(t0), "created_at %v", m.CreatedAt)
	})
}

func TestListPagingOrderStatusAndTopicMatching(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		for i := 0; i < 25; i++ {
			in := incoming("orders.dlq.v1", int64(i), fmt.Sprintf(`{"n":%d}`, i))
			ingest(t, s, t0.Add(time.Duration(i)*time.Second), in)
		}
		other := incoming("payments.dlq.v1", 0, `{}`)
		other.OriginalTopic = "payments.events.v1"
		ingest(t, s, t0, other)

		page1, total, err := s.ListDLQ(ctx, dlq.ListFilter{Topic: "orders.dlq.v1", Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.EqualValues(t, 25, total)
		require.Len(t, page1, 10)
		require.EqualValues(t, 24, page1[0].Position.Offset(), "newest first")
		page3, _, err := s.ListDLQ(ctx, dlq.ListFilter{Topic: "orders.dlq.v1", Page: 3, PageSize: 10})
		require.NoError(t, err)
		require.Len(t, page3, 5)
		require.EqualValues(t, 0, page3[4].Position.Offset())
		page4, _, err := s.ListDLQ(ctx, dlq.ListFilter{Topic: "orders.dlq.v1", Page: 4, PageSize: 10})
		require.NoError(t, err)
		require.Empty(t, page4)

		// The original topic finds the same messages.
		_, total, err = s.ListDLQ(ctx, dlq.ListFilter{Topic: "orders.events.v1", Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.EqualValues(t, 25, total)

		// Status filter.
		_, err = s.ClaimDLQ(ctx, page1[0].ID, dlq.Claim{Owner: "a", Now: t0, LeaseUntil: t0.Add(time.Minute)})
		require.NoError(t, err)
		retrying, total, err := s.ListDLQ(ctx, dlq.ListFilter{Topic: "orders.dlq.v1", Status: dlq.StatusRetrying, Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.EqualValues(t, 1, total)
		require.Equal(t, page1[0].ID, retrying[0].ID)

		empty, total, err := s.ListDLQ(ctx, dlq.ListFilter{Topic: "nothing.dlq.v1", Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.Zero(t, total)
		require.Empty(t, empty)

		topics, err := s.DLQTopics(ctx)
		require.NoError(t, err)
		require.Len(t, topics, 2)
		require.Equal(t, "orders.dlq.v1", topics[0].Topic)
		require.EqualValues(t, 24, topics[0].Counts[dlq.StatusPending])
		require.EqualValues(t, 1, topics[0].Counts[dlq.StatusRetrying])
		require.EqualValues(t, 0, topics[0].Counts[dlq.StatusDead])
		require.NotNil(t, topics[0].OldestPendingAt)
		require.True(t, topics[0].OldestPendingAt.Equal(t0), "%v", topics[0].OldestPendingAt)
	})
}

func TestGetDeleteNotFound(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		m := stored(t, s, "a.dlq.v1")
		got, err := s.GetDLQ(ctx, m.ID)
		require.NoError(t, err)
		require.Equal(t, m.ID, got.ID)
		require.NoError(t, s.DeleteDLQ(ctx, m.ID))
		_, err = s.GetDLQ(ctx, m.ID)
		require.ErrorIs(t, err, derrors.ErrNotFound)
		require.ErrorIs(t, s.DeleteDLQ(ctx, m.ID), derrors.ErrNotFound)
		_, err = s.ClaimDLQ(ctx, uuid.New(), dlq.Claim{Owner: "a", Now: t0, LeaseUntil: t0})
		require.ErrorIs(t, err, derrors.ErrNotFound)
		topics, err := s.DLQTopics(ctx)
		require.NoError(t, err)
		require.Empty(t, topics, "counts follow deletes")
	})
}

func TestKeysAndHeadersAreStoredAsBytes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		headers := []dlq.Header{
			{Key: []byte("bad\xffkey"), Value: []byte("v\xfe")},
			{Key: []byte("nul\x00"), Value: []byte{0}},
			{Key: []byte{}, Value: []byte{}},
			{Key: []byte("error"), Value: []byte("e")},
		}
		keys := map[int64][]byte{1: nil, 2: {}, 3: {0, 0xff, 1}}
		for off, key := range keys {
			in := incoming("b.dlq.v1", off, "")
			in.Key, in.Headers = key, headers
			ingest(t, s, t0, in)
		}
		msgs, _, err := s.ListDLQ(ctx, dlq.ListFilter{Topic: "b.dlq.v1", Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.Len(t, msgs, 3)
		for _, m := range msgs {
			want := keys[m.Position.Offset()]
			require.Equal(t, want, m.Key, "offset %d", m.Position.Offset())
			require.Equal(t, want == nil, m.Key == nil, "no key and an empty key differ")
			require.Equal(t, headers, m.Headers)
			require.NotNil(t, m.Payload, "an empty payload is not a missing one")
			require.False(t, m.Truncated)
		}

		// A row written before keys were bytes (key as JSON text) reads the same.
		exec(t, s, `UPDATE dlq.dlq_messages SET headers = convert_to('[{"key":"legacy","value":"dg=="}]', 'UTF8')`,
			`UPDATE dlq_messages SET headers = '[{"key":"legacy","value":"dg=="}]'`)
		m, err := s.GetDLQ(ctx, msgs[0].ID)
		require.NoError(t, err)
		require.Equal(t, []dlq.Header{{Key: []byte("legacy"), Value: []byte("v")}}, m.Headers)
	})
}

// New messages each get their own first retry time.
func TestFirstRetryTimeIsDrawnPerMessage(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		i := 0
		opts := dlq.IngestOptions{Now: t0, MaxRetries: 3, FirstRetryAt: func() *time.Time {
			i++
			at := t0.Add(time.Duration(i) * time.Second)
			return &at
		}}
		_, err := s.IngestDLQ(ctx, []dlq.Incoming{incoming("j.dlq.v1", 0, `{}`), incoming("j.dlq.v1", 1, `{}`), incoming("j.dlq.v1", 2, `{}`)}, opts)
		require.NoError(t, err)
		msgs, _, err := s.ListDLQ(ctx, dlq.ListFilter{Topic: "j.dlq.v1", Page: 1, PageSize: 10})
		require.NoError(t, err)
		seen := map[time.Time]bool{}
		for _, m := range msgs {
			seen[m.NextRetryAt.UTC()] = true
		}
		require.Len(t, seen, 3, "three messages, three times")
	})
}

func TestFeedbackUpdatesTheSameRecord(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		m := stored(t, s, "a.dlq.v1")
		claimed, err := s.ClaimDLQ(ctx, m.ID, dlq.Claim{Owner: "d", Now: t0, LeaseUntil: t0.Add(time.Minute)})
		require.NoError(t, err)
		finished(t, s, "d", t0, ended(claimed, dlq.EventAcked))

		back := incoming("a.dlq.v1", 10, `{}`)
		back.ErrorMessage = "failed again"
		back.FeedbackOf = &m.ID
		next := t0.Add(time.Hour)
		opts := dlq.IngestOptions{Now: t0.Add(time.Minute), MaxRetries: 3, FeedbackRetryAt: func(n int) *time.Time {
			require.Equal(t, 1, n)
			return &next
		}}
		res, err := s.IngestDLQ(ctx, []dlq.Incoming{back}, opts)
		require.NoError(t, err)
		require.Equal(t, dlq.IngestResult{Feedback: 1}, res)
		// Redelivered feedback is not counted twice.
		res, err = s.IngestDLQ(ctx, []dlq.Incoming{back}, opts)
		require.NoError(t, err)
		require.Equal(t, dlq.IngestResult{Duplicates: 1}, res)

		cur := onlyMessage(t, s, "a.dlq.v1")
		require.Equal(t, m.ID, cur.ID)
		require.Equal(t, dlq.StatusPending, cur.Status)
		require.Equal(t, 1, cur.RetryCount)
		require.Equal(t, "failed again", cur.ErrorMessage)
		require.True(t, cur.NextRetryAt.Equal(next))

		// Feedback for an unknown record is stored as a new message.
		ghost := uuid.New()
		orphan := incoming("a.dlq.v1", 11, `{}`)
		orphan.FeedbackOf = &ghost
		res, err = s.IngestDLQ(ctx, []dlq.Incoming{orphan}, opts)
		require.NoError(t, err)
		require.Equal(t, dlq.IngestResult{Inserted: 1}, res)

		// Two more returns reach max_retries.
		for i := 0; i < 2; i++ {
			b := back
			b.Position = dlq.LogPosition(b.Position.Source, b.Position.Topic, 0, int64(20+i))
			res, err = s.IngestDLQ(ctx, []dlq.Incoming{b}, dlq.IngestOptions{Now: t0, MaxRetries: 3})
			require.NoError(t, err)
		}
		require.Equal(t, 1, res.Dead)
		got, _ := s.GetDLQ(ctx, m.ID)
		require.Equal(t, dlq.StatusDead, got.Status)
		require.Equal(t, 3, got.RetryCount)
	})
}

// An x-dlq-id updates a record only for our own replay: the record exists,
// was republished (acknowledged), and the message came back on the
// record's source and DLQ topic. Anything else is a new dead letter, and
// the record named does not change at all.
func TestFeedbackOnlyForOurOwnReplays(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		ingest(t, s, t0, incoming("orders.dlq.v1", 1, `{"n":1}`), incoming("orders.dlq.v1", 2, `{"n":2}`))
		msgs, _, err := s.ListDLQ(ctx, dlq.ListFilter{Topic: "orders.dlq.v1", Page: 1, PageSize: 10})
		require.NoError(t, err)
		byOff := map[int64]uuid.UUID{}
		for _, m := range msgs {
			byOff[m.Position.Offset()] = m.ID
		}
		republished, never := byOff[1], byOff[2]
		resolve(t, s, republished, t0)
		snapshot := func() (*dlq.Message, *dlq.Message) {
			a, err := s.GetDLQ(ctx, republished)
			require.NoError(t, err)
			b, err := s.GetDLQ(ctx, never)
			require.NoError(t, err)
			return a, b
		}
		beforeA, beforeB := snapshot()
		require.NotNil(t, beforeA.RepublishedAt)

		copied := func(topic, source string, off int64, of uuid.UUID) dlq.Incoming {
			in := incoming(topic, off, `{"n":1}`)
			in.Position.Source, in.FeedbackOf, in.ErrorMessage = source, &of, "copied header"
			return in
		}
		opts := dlq.IngestOptions{Now: t0.Add(time.Hour), MaxRetries: 3}
		otherBytes := copied("orders.dlq.v1", "kafka", 6, republished)
		otherBytes.Payload = []byte(`{"n":1,"item":2}`)
		res, err := s.IngestDLQ(ctx, []dlq.Incoming{
			copied("billing.dlq.v1", "kafka", 1, republished),  // another DLQ topic
			copied("orders.dlq.v1", "kafka-2", 3, republished), // another source
			copied("orders.dlq.v1", "kafka", 4, never),         // never republished
			otherBytes, // not the bytes that were republished
		}, opts)
		require.NoError(t, err)
		require.Equal(t, dlq.IngestResult{Inserted: 4}, res)
		afterA, afterB := snapshot()
		require.Equal(t, beforeA, afterA, "the republished record did not change")
		require.Equal(t, beforeB, afterB, "the never republished record did not change")
		b := onlyMessage(t, s, "billing.dlq.v1")
		require.Equal(t, "copied header", b.ErrorMessage)
		require.Equal(t, dlq.StatusPending, b.Status)

		// Our own replay, back on its topic: the record is updated.
		back := copied("orders.dlq.v1", "kafka", 5, republished)
		back.ErrorMessage = "failed again"
		res, err = s.IngestDLQ(ctx, []dlq.Incoming{back}, opts)
		require.NoError(t, err)
		require.Equal(t, dlq.IngestResult{Feedback: 1}, res)
		got, err := s.GetDLQ(ctx, republished)
		require.NoError(t, err)
		require.Equal(t, dlq.StatusPending, got.Status)
		require.Equal(t, 1, got.RetryCount)
		require.Equal(t, "failed again", got.ErrorMessage)
		require.Contains(t, got.LastError, "came back to orders.dlq.v1 (at p0@5): failed again")
		require.Len(t, got.Attempts, 2)
		require.Equal(t, dlq.OutcomeResolved, got.Attempts[0].Outcome)
		require.Equal(t, dlq.OutcomeReturned, got.Attempts[1].Outcome)
	})
}

// A null value (a tombstone) is stored as null, an empty one as empty, and
// neither is a message too large to keep (Truncated): both can be retried.
// Issue 27 case 4: until Truncated had its own column, a stored null meant
// "not kept", so intake stored tombstones as empty values.
func TestNullAndEmptyValuesAreStoredApartFromTruncated(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		null := incoming("n.dlq.v1", 0, "")
		null.Payload, null.Key = nil, nil
		null.Headers = []dlq.Header{{Key: []byte("trace"), Value: nil}, {Key: []byte("empty"), Value: []byte{}}}
		empty := incoming("n.dlq.v1", 1, "")
		empty.Key = []byte{}
		truncated := incoming("n.dlq.v1", 2, "")
		truncated.Payload, truncated.Truncated, truncated.Dead = nil, true, true
		_, err := s.IngestDLQ(ctx, []dlq.Incoming{null, empty, truncated}, dlq.IngestOptions{Now: t0, MaxRetries: 3, FirstRetryAt: at(t0)})
		require.NoError(t, err)

		msgs, _, err := s.ListDLQ(ctx, dlq.ListFilter{Topic: "n.dlq.v1", Page: 1, PageSize: 10})
		require.NoError(t, err)
		byOffset := map[int64]dlq.Message{}
		for _, m := range msgs {
			byOffset[m.Position.Offset()] = m
		}
		require.Len(t, byOffset, 3)
		n, e, tr := byOffset[0], byOffset[1], byOffset[2]
		require.Nil(t, n.Payload, "a null value stays null")
		require.False(t, n.Truncated, "a null value is not one too large to keep")
		require.Nil(t, n.Key)
		require.Nil(t, n.Headers[0].Value, "a null header value stays null")
		require.NotNil(t, n.Headers[1].Value, "an empty header value stays empty")
		require.NotNil(t, e.Payload, "an empty value stays empty")
		require.Empty(t, e.Payload)
		require.NotNil(t, e.Key)
		require.False(t, e.Truncated)
		require.True(t, tr.Truncated)
		require.Equal(t, dlq.StatusDead, tr.Status)

		// Both can be retried: the claim takes them, a truncated one never.
		now := t0.Add(time.Hour)
		claimed, err := s.ClaimDueDLQ(ctx, 10, dlq.Claim{Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute), Sources: []string{"kafka"}})
		require.NoError(t, err)
		var ids []int64
		for _, m := range claimed {
			ids = append(ids, m.Position.Offset())
			if m.Position.Offset() == 0 {
				require.Nil(t, m.Payload, "the claim reads the null value as null")
			}
		}
		require.ElementsMatch(t, []int64{0, 1}, ids)

		// Revive refuses the truncated one: its value was not kept.
		_, err = s.ReviveDLQ(ctx, tr.ID, dlq.Revive{Now: now, From: dlq.StatusDead, To: dlq.State{Status: dlq.StatusPending, MaxRetries: 3}})
		require.Error(t, err)
	})
}
