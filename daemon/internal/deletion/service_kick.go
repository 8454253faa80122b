package deletion

// Kick asks the runner to look for due jobs now: a job was queued outside
// this service (a re-erase by re-verification).
func (s *Service) Kick() {
	if s.runner != nil {
		s.runner.Kick()
	}
}
