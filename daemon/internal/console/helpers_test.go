package console

import (
	"encoding/base64"
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/lifecycled/lifecycled/daemon/wire"
	"github.com/stretchr/testify/require"
)

func TestLineDiff(t *testing.T) {
	for name, tc := range map[string]struct {
		a, b string
		want []diffLine
	}{
		"same":          {"a\nb", "a\nb", []diffLine{{" ", "a"}, {" ", "b"}}},
		"changed line":  {"a\nb\nc", "a\nx\nc", []diffLine{{" ", "a"}, {"-", "b"}, {"+", "x"}, {" ", "c"}}},
		"added at end":  {"a", "a\nb", []diffLine{{" ", "a"}, {"+", "b"}}},
		"removed first": {"a\nb", "b", []diffLine{{"-", "a"}, {" ", "b"}}},
		"empty to text": {"", "x", []diffLine{{"-", ""}, {"+", "x"}}},
	} {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.want, lineDiff(tc.a, tc.b))
		})
	}
	// Past the table's bound: both sides whole, nothing lost.
	big := strings.Repeat("x\n", 600)
	d := lineDiff(big, big+"y")
	require.Equal(t, 601+601, len(d), "every line of both sides")
	require.Equal(t, diffLine{"+", "y"}, d[len(d)-1])
}

func TestViewPayload(t *testing.T) {
	b64 := func(s string) wire.Base64Field {
		v := base64.StdEncoding.EncodeToString([]byte(s))
		return wire.Base64Field{Present: true, Value: &v}
	}
	for name, tc := range map[string]struct {
		raw  json.RawMessage
		b64  wire.Base64Field
		kind string
		text string
	}{
		"json":      {raw: json.RawMessage(`{"a":1}`), kind: "json", text: "{\n  \"a\": 1\n}"},
		"not kept":  {raw: json.RawMessage(`null`), kind: "empty"},
		"tombstone": {raw: json.RawMessage(`null`), b64: wire.Base64Field{Present: true}, kind: "null"},
		"empty":     {raw: json.RawMessage(`null`), b64: b64(""), kind: "text"},
		"text":      {b64: b64("payment 1: not json\n"), kind: "text", text: "payment 1: not json\n"},
		"binary":    {b64: b64("\x00\xff\x01k"), kind: "binary", text: "00000000  00 ff 01 6b                                       |...k|\n"},
		"latin1":    {b64: b64("caf\xe9"), kind: "binary"},
	} {
		t.Run(name, func(t *testing.T) {
			v := viewPayload(tc.raw, tc.b64, base64.StdEncoding.DecodeString)
			require.Equal(t, tc.kind, v.Kind)
			if tc.text != "" {
				require.Equal(t, tc.text, v.Text)
			}
		})
	}
}

func TestReplayBodySendsOnlyWhatChanged(t *testing.T) {
	stored := replayForm{Payload: "{\n  \"a\": 1\n}", Key: "k1", Topic: "orders.events.v1"}
	for name, tc := range map[string]struct {
		form replayForm
		want string
	}{
		"nothing":       {stored, `{}`},
		"json payload":  {replayForm{Payload: `{"a": 2}`, Key: "k1", Topic: "orders.events.v1"}, `{"payload":{"a":2}}`},
		"text payload":  {replayForm{Payload: "not json <&>", Key: "k1", Topic: "orders.events.v1"}, `{"payload_base64":"bm90IGpzb24gPCY+"}`},
		"key and topic": {replayForm{Payload: stored.Payload, Key: "", Topic: " orders.fixed.v1 "}, `{"key":"","topic":"orders.fixed.v1"}`},
		"headers": {replayForm{Payload: stored.Payload, Key: "k1", Topic: "orders.events.v1", Headers: "trace=t2\r\nold=\n\nx=a=b"},
			`{"headers":{"old":null,"trace":"t2","x":"a=b"}}`},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := replayBody(tc.form, stored)
			require.NoError(t, err)
			b, err := json.Marshal(got)
			require.NoError(t, err)
			require.JSONEq(t, tc.want, string(b))
		})
	}
}

func TestFilterJSONAndAPIQuery(t *testing.T) {
	q, err := url.ParseQuery("topic=orders.dlq.v1&status=pending,DEAD&status=&header=a=1&header=b&error=&cursor=c&junk=1")
	require.NoError(t, err)
	require.Equal(t, url.Values{"topic": {"orders.dlq.v1"}, "status": {"pending,DEAD"}, "header": {"a=1", "b"}, "cursor": {"c"}},
		apiQuery(q, searchFields), "empty values and unknown names left out")
	b, err := json.Marshal(filterJSON(apiQuery(q, bulkFilterFields)))
	require.NoError(t, err)
	require.JSONEq(t, `{"topic":"orders.dlq.v1","status":["PENDING","DEAD"],"header":["a=1","b"]}`, string(b))
}

// Every page template parses with the layout (New panics otherwise) and
// renders on empty data: the empty states need no API answer.
func TestPagesRenderEmpty(t *testing.T) {
	c := New(Options{})
	for name, data := range map[string]any{
		"overview": overviewData{}, "dlq": dlqIndexData{}, "search": searchData{Form: url.Values{}, URL: &url.URL{}},
		"message": messageData{}, "bulk": bulkData{}, "operation": operationData{}, "tenants": tenantsData{},
		"tenant": tenantData{}, "retention": retentionData{}, "operations": operationsData{}, "error": nil,
	} {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			c.render(rec, 200, name, &page{Title: name, Data: data})
			require.Equal(t, 200, rec.Code, rec.Body.String())
			require.Contains(t, rec.Body.String(), "<title>"+name+" · lifecycled</title>")
		})
	}
	require.Len(t, c.pages, 11, "a test case for every page")
}
