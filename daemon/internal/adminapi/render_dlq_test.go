package adminapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

func TestMessageJSONPayloadAndTimes(t *testing.T) {
	created := time.Date(2026, 2, 20, 10, 30, 0, 0, time.UTC)
	id := uuid.MustParse("550e8400-e29b-41d4-a716-446655440000")
	m := &dlq.Message{ID: id, OriginalTopic: "orders.events.v1", ErrorMessage: "processing failed", MaxRetries: 3,
		Payload: []byte(`{"order_id":"123"}`), Status: dlq.StatusPending, CreatedAt: created, UpdatedAt: created,
		Position: dlq.LogPosition("kafka", "orders.dlq.v1", 0, 0), Headers: []dlq.Header{{Key: []byte("bin"), Value: []byte{0xff, 0x00}}, {Key: []byte("error"), Value: []byte("x")}}}
	b, err := json.Marshal(messageJSON(m, true))
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
	b, _ = json.Marshal(messageJSON(m, true))
	got = nil
	require.NoError(t, json.Unmarshal(b, &got))
	require.Nil(t, got["payload"])
	require.Equal(t, "cGxhaW4gdGV4dCAB", got["payload_base64"])

	m.Payload = []byte{} // an empty value: zero bytes
	b, _ = json.Marshal(messageJSON(m, true))
	got = nil
	require.NoError(t, json.Unmarshal(b, &got))
	require.Nil(t, got["payload"])
	require.Equal(t, "", got["payload_base64"])

	m.Payload = nil // a null value (a tombstone): not an empty one
	b, _ = json.Marshal(messageJSON(m, true))
	got = nil
	require.NoError(t, json.Unmarshal(b, &got))
	require.Nil(t, got["payload"])
	require.Contains(t, got, "payload_base64", "null, not absent")
	require.Nil(t, got["payload_base64"])
	require.NotContains(t, got, "truncated")

	m.Payload, m.Truncated = nil, true // too large to take in whole: kept without its payload
	b, _ = json.Marshal(messageJSON(m, true))
	got = nil
	require.NoError(t, json.Unmarshal(b, &got))
	require.Nil(t, got["payload"])
	require.NotContains(t, got, "payload_base64")
	require.Equal(t, true, got["truncated"])
}

// The exact JSON shape of keys and headers: text when the bytes are valid
// UTF-8, else null with the bytes in the *_base64 field (the marker).
func TestMessageJSONShowsBytesAsTextOrBase64WithAMarker(t *testing.T) {
	m := &dlq.Message{ID: uuid.New(), Payload: []byte("{}"), Key: []byte("k\xfe2"), Headers: []dlq.Header{
		{Key: []byte("bad\xffkey"), Value: []byte("v\xfe")},
		{Key: []byte("error"), Value: []byte("tab\tnul\x00")},
		{Key: []byte{}, Value: []byte{}},
		{Key: []byte("trace"), Value: nil},
	}, LastError: "MESSAGE_TOO_LARGE", Attempts: []dlq.Attempt{{At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Outcome: dlq.OutcomeDead, Error: "too large", Trigger: dlq.TriggerManual}}}
	b, err := json.Marshal(messageJSON(m, true))
	require.NoError(t, err)
	var got struct {
		Key       *string          `json:"key"`
		KeyBase64 *string          `json:"key_base64"`
		Headers   []map[string]any `json:"headers"`
		LastError *string          `json:"last_error"`
		Attempts  []map[string]any `json:"attempts"`
	}
	require.NoError(t, json.Unmarshal(b, &got))
	require.Nil(t, got.Key)
	require.Equal(t, "a/4y", *got.KeyBase64)
	require.Equal(t, map[string]any{"key": nil, "key_base64": "YmFk/2tleQ==", "value": nil, "value_base64": "dv4="}, got.Headers[0])
	require.Equal(t, map[string]any{"key": "error", "value": "tab\tnul\x00"}, got.Headers[1], "valid UTF-8 is text, control characters included")
	require.Equal(t, map[string]any{"key": "", "value": ""}, got.Headers[2], "an empty value is text")
	require.Equal(t, map[string]any{"key": "trace", "value": nil, "value_base64": nil}, got.Headers[3], "a null value says so")
	require.Equal(t, "MESSAGE_TOO_LARGE", *got.LastError)
	require.Equal(t, []map[string]any{{"at": "2026-01-02T03:04:05.000+00:00", "outcome": "dead", "error": "too large", "trigger": "manual"}}, got.Attempts)

	m.Key, m.LastError, m.Attempts = []byte("plain"), "", nil
	b, _ = json.Marshal(messageJSON(m, true))
	var plain map[string]any
	require.NoError(t, json.Unmarshal(b, &plain))
	require.Equal(t, "plain", plain["key"])
	require.NotContains(t, plain, "key_base64")
	require.Nil(t, plain["last_error"])
	require.Equal(t, []any{}, plain["attempts"])

	m.Key = nil
	b, _ = json.Marshal(messageJSON(m, true))
	plain = nil
	require.NoError(t, json.Unmarshal(b, &plain))
	require.Nil(t, plain["key"], "a null key")
	require.Contains(t, plain, "key_base64", "null, not absent: a null key is not an empty one")
	require.Nil(t, plain["key_base64"])

	m.Key = []byte{}
	b, _ = json.Marshal(messageJSON(m, true))
	plain = nil
	require.NoError(t, json.Unmarshal(b, &plain))
	require.Equal(t, "", plain["key"], "an empty key is a key")
	require.NotContains(t, plain, "key_base64")
}

// FuzzMessageJSONKeepsEveryByte renders messages with keys and headers of any
// bytes: the JSON must parse and give every byte back, text or base64.
func FuzzMessageJSONKeepsEveryByte(f *testing.F) {
	f.Add([]byte("kafka_dlt-original-topic\x00orders.events.v1\x00error\x00boom"), []byte("k"), []byte(`{"a":1}`))
	f.Add([]byte("bad\xffkey\x00v\xfe\x00\x00"), []byte{0xff}, []byte{})
	f.Add([]byte{}, []byte(nil), []byte{0})
	f.Fuzz(func(t *testing.T, raw, key, payload []byte) {
		var headers []dlq.Header
		parts := bytes.Split(raw, []byte{0})
		for i := 0; i < len(parts); i += 2 {
			h := dlq.Header{Key: parts[i]}
			if i+1 < len(parts) {
				h.Value = parts[i+1]
			}
			headers = append(headers, h)
		}
		m := &dlq.Message{Payload: payload, Key: key, Headers: headers}
		b, err := json.Marshal(messageJSON(m, true))
		if err != nil {
			t.Fatalf("message JSON: %v", err)
		}
		var back wire.Message
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("message JSON does not parse: %v", err)
		}
		if len(back.Headers) != len(headers) {
			t.Fatalf("%d headers of %d", len(back.Headers), len(headers))
		}
		for i, h := range back.Headers {
			k, v := fromJSON(t, h.Key, h.KeyBase64), fromJSON(t, h.Value, h.ValueBase64)
			if !bytes.Equal(k, headers[i].Key) || !bytes.Equal(v, headers[i].Value) || (v == nil) != (headers[i].Value == nil) {
				t.Fatalf("header %d: JSON gives %q=%q, want %q=%q", i, k, v, headers[i].Key, headers[i].Value)
			}
		}
		if k := fromJSON(t, back.Key, back.KeyBase64); !bytes.Equal(k, key) || (key == nil) != (k == nil) {
			t.Fatalf("key: JSON gives %q, want %q", k, key)
		}
		if back.PayloadBase64.Present {
			if p := fromJSON(t, nil, back.PayloadBase64); !bytes.Equal(p, payload) || (p == nil) != (payload == nil) {
				t.Fatalf("payload: JSON gives %q, want %q", p, payload)
			}
		}
	})
}

// fromJSON gives back the bytes a text field and its *_base64 field show:
// nil for a null value, empty for zero bytes.
func fromJSON(t *testing.T, text *string, b64 wire.Base64Field) []byte {
	switch {
	case b64.Present:
		if text != nil {
			t.Fatalf("both text and base64")
		}
		if b64.Value == nil {
			return nil
		}
		b, err := base64.StdEncoding.DecodeString(*b64.Value)
		if err != nil {
			t.Fatal(err)
		}
		return b
	case text != nil:
		return append([]byte{}, *text...)
	}
	t.Fatalf("neither text nor base64")
	return nil
}
