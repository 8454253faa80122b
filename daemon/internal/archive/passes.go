package archive

import (
	"sync"
	"time"
)

// maxPasses is how many recent passes a Scheduler remembers.
const maxPasses = 20

// Pass is one retention pass this daemon ran (scheduled or asked for),
// for operators: what it moved and purged, how long it took, or why it
// failed. Passes are kept in memory, newest first, since the daemon
// started.
type Pass struct {
	StartedAt time.Time
	Trigger   string // "scheduled" or "manual"
	Result    Result
	Err       string
}

// Status is what the retention loop is doing: its recent passes and when
// the next scheduled one is due.
type Status struct {
	Enabled bool
	Config  Config
	// NextRun is when the next scheduled pass is due; zero while one runs
	// or when the loop is not running.
	NextRun time.Time
	Passes  []Pass
}

type passLog struct {
	mu     sync.Mutex
	passes []Pass
}

func (l *passLog) add(p Pass) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.passes = append([]Pass{p}, l.passes...)
	if len(l.passes) > maxPasses {
		l.passes = l.passes[:maxPasses]
	}
}

func (l *passLog) list() []Pass {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Pass(nil), l.passes...)
}

// Status returns the recent passes and the next run.
func (s *Scheduler) Status() Status {
	cfg := s.cfg()
	return Status{Enabled: cfg.Enabled, Config: cfg, NextRun: s.loop.Next(), Passes: s.passes.list()}
}
