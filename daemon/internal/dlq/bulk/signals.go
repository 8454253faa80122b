package bulk

import (
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/internal/testsignal"
)

// Signals are the points of a bulk operation's run that the
// takeover tests wait for, instead of sleeping until another daemon has
// probably got there. They are off (a nil check each) unless a test turns
// them on (Service.Signals), before the service runs anything.
type Signals struct {
	// Polled: the runner tried to claim an operation to run.
	Polled testsignal.Signal[Poll]
	// PageStarted: a page of a bulk retry goes to the store to be claimed,
	// sent and recorded; on PostgreSQL it may wait there for the row
	// locks of another daemon's page.
	PageStarted testsignal.Signal[PageTry]
	// PageTried: that page came back from the store.
	PageTried testsignal.Signal[PageTry]
	// LeaseLost: the heartbeat found the operation held by another
	// daemon; the run stops after the pages under way.
	LeaseLost testsignal.Signal[uuid.UUID]
	// RunEnded: a run of the runner ended and left the runs under way.
	RunEnded testsignal.Signal[uuid.UUID]
}

// Poll is one claim of the runner: at what time (the service's clock),
// and the operation it took (uuid.Nil: none, or Err).
type Poll struct {
	Now     time.Time
	Claimed uuid.UUID
	Err     error
}

// PageTry is one try of a page of a bulk retry. Later and Err are known
// once it came back (PageTried).
type PageTry struct {
	Operation uuid.UUID
	First     int64 // the first item tried (its seq)
	Try       int   // 1 for the page, then each try of its items under another claim
	Later     int   // items under another claim, to try again
	Err       error
}

// Signals turns s's signals on and returns them. Tests call it before s
// (or its runner) runs anything; nothing else does.
func (s *Service) Signals() *Signals {
	s.signals.init()
	return &s.signals
}

func (s *Signals) init() {
	s.Polled.Init()
	s.PageStarted.Init()
	s.PageTried.Init()
	s.LeaseLost.Init()
	s.RunEnded.Init()
}

func polled(now time.Time, op *dlq.Operation, err error) Poll {
	p := Poll{Now: now, Err: err}
	if op != nil {
		p.Claimed = op.ID
	}
	return p
}
