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
