package dlq_test

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// logBuffer keeps what a test's daemon logged.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// daemonLog is a daemon's logger in a test: what it logged is printed
// when the test fails, since a daemon's warnings (an outage that kept an
// operation's lease, a claim that was lost) say why an operation stalled.
// Goroutines that outlive the test still write to the buffer, never to t.
func daemonLog(t *testing.T, name string) hclog.Logger {
	l := &logBuffer{}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		t.Logf("%s logged:\n%s", name, l.buf.String())
	})
	return hclog.New(&hclog.LoggerOptions{Name: name, Output: l, Level: hclog.Info})
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339Nano)
}
