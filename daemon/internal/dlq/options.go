package dlq

import "time"

// An Option changes how a Service keeps time and renews claims. The
// daemon uses none; tests use them to check schedules exactly and to move
// a lease past its end while a send is in flight.
type Option func(*Service)

// WithClock makes now the service's clock.
func WithClock(now func() time.Time) Option { return func(s *Service) { s.now = now } }

// WithJitter makes rnd the service's source of jitter, in [0, 1).
func WithJitter(rnd func() float64) Option { return func(s *Service) { s.rnd = rnd } }

// WithClaimPace makes the service renew the leases of the messages it is
// sending at each tick of pace (a test's clock moving), and call renewed
// after each renewal.
func WithClaimPace(pace func() (<-chan time.Time, func()), renewed func()) Option {
	return func(s *Service) {
		s.claimPace = func(time.Duration) (<-chan time.Time, func()) { return pace() }
		s.claimRenewed = renewed
	}
}

// WithClaimHeartbeat makes the service renew the leases of the messages it
// is sending every every, and call renewed after each renewal.
func WithClaimHeartbeat(every time.Duration, renewed func()) Option {
	return func(s *Service) {
		s.claimPace = func(time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(every)
			return t.C, t.Stop
		}
		s.claimRenewed = renewed
	}
}

// WithRecordTimeout bounds one recording of send outcomes (30 s by
// default); tests shorten it.
func WithRecordTimeout(d time.Duration) Option { return func(s *Service) { s.recordTimeout = d } }
