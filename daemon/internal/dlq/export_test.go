package dlq

import "time"

// SetClock lets tests in package dlq_test drive the service's notion of
// now, so backoff schedules are checked exactly.
func SetClock(s *Service, now func() time.Time) { s.now = now }

// SetRand sets the jitter source of the service, so that jittered
// schedules are checked exactly.
func SetRand(s *Service, rnd func() float64) { s.rnd = rnd }

// SetClaimHeartbeat makes the service renew the leases of the messages it
// is sending every every, and call renewed after each renewal, so a test
// can move the clock past a lease while a send is in flight.
func SetClaimHeartbeat(s *Service, every time.Duration, renewed func()) {
	s.claimPace = func(time.Duration) (<-chan time.Time, func()) {
		t := time.NewTicker(every)
		return t.C, t.Stop
	}
	s.claimRenewed = renewed
}

// SetClaimPace makes the service renew the leases of the messages it is
// sending at each tick of pace (a test's clock moving), and call renewed
// after each renewal.
func SetClaimPace(s *Service, pace func() (<-chan time.Time, func()), renewed func()) {
	s.claimPace = func(time.Duration) (<-chan time.Time, func()) { return pace() }
	s.claimRenewed = renewed
}

// SetBulkPageCap caps the page size of s's bulk operations at n.
func SetBulkPageCap(s *Service, n int) { s.bulkPageCap = n }

// OperationSignals are the points of a bulk operation's run a test can
// wait for, and what each says.
type (
	OperationSignals = operationSignals
	Poll             = poll
	PageTry          = pageTry
)

// Signals turns s's signals on and returns them; call it before s (or its
// runner) runs anything.
func Signals(s *Service) *OperationSignals {
	s.signals.init()
	return &s.signals
}

// RunsUnderWay is how many operations r runs now.
func RunsUnderWay(r *OperationRunner) int { return r.runs.Len() }
