package pluginhost

import (
	"bytes"
	"strings"
	"sync"
)

// tailBuffer keeps the last lines a plugin wrote to stderr, for
// `lifecycled plugins list` and for start and crash errors.
type tailBuffer struct {
	mu    sync.Mutex
	max   int
	lines []string
	part  []byte
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.part = append(t.part, p...)
	for {
		i := bytes.IndexByte(t.part, '\n')
		if i < 0 {
			break
		}
		line := string(bytes.TrimRight(t.part[:i], "\r"))
		t.part = t.part[i+1:]
		if line == "" || handshakeNoise(line) {
			continue
		}
		if len(line) > 2048 {
			line = line[:2048] + "..."
		}
		t.lines = append(t.lines, line)
		if len(t.lines) > t.max {
			t.lines = t.lines[len(t.lines)-t.max:]
		}
	}
	if len(t.part) > 64<<10 {
		t.part = t.part[:0]
	}
	return len(p), nil
}

// Lines returns a copy of the kept lines, oldest first.
func (t *tailBuffer) Lines() []string {
	return t.Tail(t.max)
}

// Tail returns up to n of the last lines.
func (t *tailBuffer) Tail(n int) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n > len(t.lines) {
		n = len(t.lines)
	}
	out := make([]string, n)
	copy(out, t.lines[len(t.lines)-n:])
	return out
}

// handshakeLines are what go-plugin's server logs at every start (at debug,
// whatever the plugin's own level): in a crash's last lines they pushed out
// the plugin's own, and told an operator nothing.
var handshakeLines = []string{`"@message":"configuring server automatic mTLS"`, `"@message":"plugin address"`}

func handshakeNoise(line string) bool {
	for _, h := range handshakeLines {
		if strings.Contains(line, h) {
			return true
		}
	}
	return false
}
