package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/lifecycled/lifecycled/daemon/wire"
	"github.com/stretchr/testify/require"
)

func strp(s string) *string { return &s }

func TestReplayBodyFromFlags(t *testing.T) {
	body, err := replayBody([]byte{0, 0xff}, true, []string{"a=1", "b=", "c=x=y"}, []string{"d"}, "", true, "t.v1")
	require.NoError(t, err)
	require.Equal(t, wire.ReplayRequest{
		PayloadBase64: strp("AP8="),
		Headers:       map[string]*string{"a": strp("1"), "b": strp(""), "c": strp("x=y"), "d": nil},
		Key:           strp(""),
		Topic:         strp("t.v1"),
	}, body)
	sent, err := json.Marshal(body)
	require.NoError(t, err)
	require.JSONEq(t, `{"payload_base64": "AP8=", "headers": {"a": "1", "b": "", "c": "x=y", "d": null}, "key": "", "topic": "t.v1"}`, string(sent),
		"an empty key and value are sent; a dropped header is null")
	body, err = replayBody(nil, false, nil, nil, "", false, "")
	require.NoError(t, err)
	sent, err = json.Marshal(body)
	require.NoError(t, err)
	require.JSONEq(t, `{}`, string(sent), "nothing given: the stored message as it is")
	body, err = replayBody([]byte{}, true, nil, nil, "", false, "")
	require.NoError(t, err)
	require.Equal(t, wire.ReplayRequest{PayloadBase64: strp("")}, body, "an empty file is an empty payload")
	for _, bad := range [][2][]string{{{"noequals"}, nil}, {{"=v"}, nil}, {nil, {""}}, {{"a=1"}, {"a"}}} {
		_, err := replayBody(nil, false, bad[0], bad[1], "", false, "")
		require.Error(t, err, "%q", bad)
	}
}

func TestReadPayloadRefusesWhatTheAPICannotTake(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok")
	require.NoError(t, os.WriteFile(ok, make([]byte, maxPayloadFile), 0o600))
	b, err := readPayload(ok)
	require.NoError(t, err)
	require.Len(t, b, maxPayloadFile)
	big := filepath.Join(dir, "big")
	require.NoError(t, os.WriteFile(big, make([]byte, maxPayloadFile+1), 0o600))
	_, err = readPayload(big)
	require.ErrorContains(t, err, "too large")
	_, err = readPayload(filepath.Join(dir, "missing"))
	require.Error(t, err)
}

// The resume hint of a paused topic pastes into a shell as one word,
// whatever the source named the topic.
func TestShellWord(t *testing.T) {
	for in, want := range map[string]string{
		"orders.dlq.v1":        "orders.dlq.v1",
		"orders:dlq":           "orders:dlq",
		"orders/order.created": "orders/order.created",
		"Bestellungen dlq/ä":   "'Bestellungen dlq/ä'",
		"it's":                 `'it'\''s'`,
		"a;rm -rf":             "'a;rm -rf'",
		"$(x)":                 "'$(x)'",
	} {
		require.Equal(t, want, shellWord(in), in)
	}
}
