package dlq

import "time"

// SetClock lets tests in package dlq_test drive the service's and the
// intake's notion of now, so backoff schedules are checked exactly.
func SetClock(s *Service, in *Intake, now func() time.Time) {
	if s != nil {
		s.now = now
	}
	if in != nil {
		in.now = now
	}
}
