package dlq_test

import (
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// daemonLog is a daemon's logger in a test: what it logged is printed
// when the test fails, since a daemon's warnings (an outage that kept an
// operation's lease, a claim that was lost) say why an operation stalled.
// Goroutines that outlive the test still write to the buffer, never to t.
func daemonLog(t *testing.T, name string) hclog.Logger {
	out := &testsvc.SyncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s logged:\n%s", name, out.String())
		}
	})
	return hclog.New(&hclog.LoggerOptions{Name: name, Output: out, Level: hclog.Info})
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339Nano)
}
