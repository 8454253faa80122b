package pluginhost

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// go-plugin's handshake lines, logged at every start, stay out of the tail
// that `plugins list`, the console and crash errors show; the plugin's own
// lines stay, long ones cut.
func TestTheStderrTailLeavesOutTheHandshake(t *testing.T) {
	tb := newTailBuffer(3)
	_, _ = tb.Write([]byte(`{"@level":"debug","@message":"configuring server automatic mTLS","@timestamp":"2026-11-29T21:08:40.273175Z"}` + "\n" +
		`{"@level":"debug","@message":"plugin address","@timestamp":"2026-11-29T21:08:40.294490Z","address":"/tmp/plugin4110866661","network":"unix"}` + "\n" +
		`{"@level":"warn","@message":"the broker ended the consumer of a dead-letter queue; reconnecting","queue":"orders:dlq"}` + "\n" +
		"panic: boom\n\n"))
	require.Equal(t, []string{`{"@level":"warn","@message":"the broker ended the consumer of a dead-letter queue; reconnecting","queue":"orders:dlq"}`,
		"panic: boom"}, tb.Lines())
}
