package dlq

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/sdk"
)

func TestStatusStringsRoundTrip(t *testing.T) {
	for _, s := range Statuses {
		got, err := ParseStatus(s.String())
		require.NoError(t, err)
		require.Equal(t, s, got)
	}
	for _, bad := range []string{"", "pending", "DONE", "PENDING ", "RESOLVED\x00"} {
		_, err := ParseStatus(bad)
		require.ErrorIs(t, err, ErrInvalidStatus, bad)
	}
	require.False(t, StatusPending.Terminal())
	require.False(t, StatusRetrying.Terminal())
	require.True(t, StatusResolved.Terminal())
	require.True(t, StatusDead.Terminal())
}

func TestTransitions(t *testing.T) {
	allowed := map[[2]Status]bool{
		{StatusPending, StatusRetrying}:  true,
		{StatusPending, StatusDead}:      true,
		{StatusRetrying, StatusResolved}: true,
		{StatusRetrying, StatusPending}:  true,
		{StatusRetrying, StatusDead}:     true,
	}
	for _, from := range Statuses {
		for _, to := range Statuses {
			require.Equal(t, allowed[[2]Status{from, to}], CanTransition(from, to), "%s -> %s", from, to)
		}
	}
}

func TestIsRetryable(t *testing.T) {
	tests := map[string]struct {
		status        Status
		count, max    int
		want          bool
		wantReasonSub string
	}{
		"new pending":          {StatusPending, 0, 3, true, ""},
		"pending with retries": {StatusPending, 2, 3, true, ""},
		"retrying":             {StatusRetrying, 1, 3, true, ""},
		"limit reached":        {StatusPending, 3, 3, false, "status=PENDING, retry_count=3/3"},
		"dead":                 {StatusDead, 3, 3, false, "status=DEAD, retry_count=3/3"},
		"resolved":             {StatusResolved, 0, 3, false, "status=RESOLVED, retry_count=0/3"},
		"max zero":             {StatusPending, 0, 0, false, "status=PENDING, retry_count=0/0"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := &Message{Status: tc.status, RetryCount: tc.count, MaxRetries: tc.max}
			require.Equal(t, tc.want, m.IsRetryable())
			if tc.wantReasonSub != "" {
				require.Equal(t, "message is not retryable: "+tc.wantReasonSub, m.NotRetryableReason())
			}
		})
	}
}

func TestAfterFailedAttempt(t *testing.T) {
	st, n := AfterFailedAttempt(0, 3)
	require.Equal(t, StatusPending, st)
	require.Equal(t, 1, n)
	st, n = AfterFailedAttempt(1, 3)
	require.Equal(t, StatusPending, st)
	require.Equal(t, 2, n)
	st, n = AfterFailedAttempt(2, 3)
	require.Equal(t, StatusDead, st)
	require.Equal(t, 3, n)
	st, _ = AfterFailedAttempt(0, 1)
	require.Equal(t, StatusDead, st)
}

func TestToJSONPayloadAndTimes(t *testing.T) {
	created := time.Date(2026, 2, 20, 10, 30, 0, 0, time.UTC)
	id := uuid.MustParse("550e8400-e29b-41d4-a716-446655440000")
	m := &Message{ID: id, OriginalTopic: "orders.events.v1", ErrorMessage: "processing failed", MaxRetries: 3,
		Payload: []byte(`{"order_id":"123"}`), Status: StatusPending, CreatedAt: created, UpdatedAt: created,
		Position: Position{Source: "kafka", Topic: "orders.dlq.v1"}, Headers: []Header{{Key: "bin", Value: []byte{0xff, 0x00}}, {Key: "error", Value: []byte("x")}}}
	b, err := json.Marshal(m.ToJSON())
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(b, &got))
	require.Equal(t, map[string]any{"order_id": "123"}, got["payload"])
	require.NotContains(t, got, "payload_base64")
	require.Equal(t, "2026-02-20T10:30:00.000+00:00", got["created_at"])
	require.Nil(t, got["last_retry_at"])
	for _, k := range []string{"id", "original_topic", "error_message", "retry_count", "max_retries", "payload", "status", "created_at", "updated_at", "last_retry_at"} {
		require.Contains(t, got, k)
	}
	hs := got["headers"].([]any)
	require.Equal(t, "/wA=", hs[0].(map[string]any)["value_base64"])
	require.Equal(t, "x", hs[1].(map[string]any)["value"])

	m.Payload = []byte("plain text \x01")
	b, _ = json.Marshal(m.ToJSON())
	got = nil
	require.NoError(t, json.Unmarshal(b, &got))
	require.Nil(t, got["payload"])
	require.Equal(t, "cGxhaW4gdGV4dCAB", got["payload_base64"])
}

func TestInterpretHeaders(t *testing.T) {
	id := uuid.New()
	tests := map[string]struct {
		headers      []sdk.Header
		mapped       string
		wantOriginal string
		wantError    string
		wantFeedback *uuid.UUID
	}{
		"spring": {
			headers:      []sdk.Header{{Key: "kafka_dlt-original-topic", Value: []byte("orders.events.v1")}, {Key: "kafka_dlt-exception-message", Value: []byte("NPE at Foo")}},
			wantOriginal: "orders.events.v1", wantError: "NPE at Foo",
		},
		"connect": {
			headers:      []sdk.Header{{Key: "__connect.errors.topic", Value: []byte("payments")}, {Key: "__connect.errors.exception.message", Value: []byte("bad record")}},
			wantOriginal: "payments", wantError: "bad record",
		},
		"plain convention": {
			headers:      []sdk.Header{{Key: "original_topic", Value: []byte("users.events.v1")}, {Key: "error", Value: []byte("boom")}},
			wantOriginal: "users.events.v1", wantError: "boom",
		},
		"error header wins over spring": {
			headers: []sdk.Header{{Key: "kafka_dlt-exception-message", Value: []byte("spring")}, {Key: "error", Value: []byte("explicit")}},
			mapped:  "x.events.v1", wantOriginal: "x.events.v1", wantError: "explicit",
		},
		"mapping when no header": {
			headers: nil, mapped: "orders.events.v1", wantOriginal: "orders.events.v1", wantError: UnknownError,
		},
		"dlq topic as last resort": {
			headers: nil, wantOriginal: "orders.dlq.v1", wantError: UnknownError,
		},
		"feedback id": {
			headers: []sdk.Header{{Key: "x-dlq-id", Value: []byte(id.String())}, {Key: "error", Value: []byte("again")}},
			mapped:  "o", wantOriginal: "o", wantError: "again", wantFeedback: &id,
		},
		"bad feedback id ignored": {
			headers: []sdk.Header{{Key: "x-dlq-id", Value: []byte("not-a-uuid")}}, mapped: "o", wantOriginal: "o", wantError: UnknownError,
		},
		"nul and invalid utf8 sanitised": {
			headers:      []sdk.Header{{Key: "original_topic", Value: []byte("a\x00b")}, {Key: "error", Value: []byte("e\xff\x00")}},
			wantOriginal: "ab", wantError: "e\uFFFD",
		},
		"empty header values skipped": {
			headers:      []sdk.Header{{Key: "kafka_dlt-original-topic", Value: nil}, {Key: "original_topic", Value: []byte("z")}, {Key: "error", Value: []byte("   ")}},
			wantOriginal: "z", wantError: UnknownError,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := Interpret("kafka", sdk.DeadLetter{
				Position: sdk.Position{Topic: "orders.dlq.v1", Partition: 2, Offset: 7}, Headers: tc.headers, Value: []byte("{}"),
				OriginalTopic: tc.mapped, Timestamp: time.Unix(1700000000, 0),
			})
			require.Equal(t, tc.wantOriginal, in.OriginalTopic)
			require.Equal(t, tc.wantError, in.ErrorMessage)
			require.Equal(t, tc.wantFeedback, in.FeedbackOf)
			require.Equal(t, Position{Source: "kafka", Topic: "orders.dlq.v1", Partition: 2, Offset: 7}, in.Position)
			require.Len(t, in.Headers, len(tc.headers), "headers kept as received")
		})
	}
}

func TestRepublishHeadersReplaceEarlierDLQHeaders(t *testing.T) {
	id := uuid.New()
	m := &Message{ID: id, RetryCount: 1, Headers: []Header{{Key: "trace", Value: []byte("t1")}, {Key: "x-dlq-id", Value: []byte("old")}, {Key: "X-DLQ-Retry-Count", Value: []byte("9")}}}
	hs := RepublishHeaders(m)
	require.Equal(t, []sdk.Header{{Key: "trace", Value: []byte("t1")}, {Key: "x-dlq-id", Value: []byte(id.String())}, {Key: "x-dlq-retry-count", Value: []byte("2")}}, hs)
}

func TestValidTopic(t *testing.T) {
	for _, ok := range []string{"orders.dlq.v1", "a", "A_b-c.9"} {
		require.NoError(t, ValidTopic(ok), ok)
	}
	long := make([]byte, 300)
	for i := range long {
		long[i] = 'a'
	}
	for _, bad := range []string{"", ".", "..", "a/b", "a%2Fb", "a b", "ä", string(long), "a\x00"} {
		require.Error(t, ValidTopic(bad), bad)
	}
}

func FuzzHeaders(f *testing.F) {
	f.Add("kafka_dlt-original-topic", []byte("orders.events.v1"), "error", []byte("boom"), []byte(`{"a":1}`))
	f.Add("x-dlq-id", []byte("550e8400-e29b-41d4-a716-446655440000"), "__connect.errors.topic", []byte{0xff, 0}, []byte{0})
	f.Fuzz(func(t *testing.T, k1 string, v1 []byte, k2 string, v2 []byte, payload []byte) {
		in := Interpret("kafka", sdk.DeadLetter{Position: sdk.Position{Topic: "t.dlq.v1"}, Headers: []sdk.Header{{Key: k1, Value: v1}, {Key: k2, Value: v2}}, Value: payload})
		for _, s := range []string{in.OriginalTopic, in.ErrorMessage} {
			if s == "" || len(s) > maxErrorLength || !utf8Valid(s) || containsNUL(s) {
				t.Fatalf("unsafe text %q", s)
			}
		}
		if len(in.OriginalTopic) > maxTopicLength {
			t.Fatalf("original topic too long: %d", len(in.OriginalTopic))
		}
		m := &Message{Payload: in.Payload, Headers: in.Headers}
		if _, err := json.Marshal(m.ToJSON()); err != nil {
			t.Fatalf("message JSON: %v", err)
		}
	})
}
