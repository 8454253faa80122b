package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/lifecycled/lifecycled/sdk"
)

// Health implements sdk.HealthChecker: a request to a broker on the
// republishing client's connections (franz-go's Ping), which fails when no
// seed broker answers or the SASL login is refused.
func (s *source) Health(ctx context.Context) error {
	s.mu.Lock()
	producer := s.producer
	s.mu.Unlock()
	if producer == nil {
		return sdk.Unavailable(errors.New("not configured"))
	}
	if err := producer.Ping(ctx); err != nil {
		return sdk.Unavailable(fmt.Errorf("reach a Kafka broker: %w", err))
	}
	return nil
}
