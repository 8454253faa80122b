package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/lifecycled/lifecycled/sdk"
)

// Health implements sdk.HealthChecker: a round trip to the database that
// holds the table.
func (s *source) Health(ctx context.Context) error {
	_, pool, _, _ := s.state()
	if pool == nil {
		return sdk.Unavailable(errors.New("not configured"))
	}
	if err := pool.Ping(ctx); err != nil {
		return sdk.Unavailable(fmt.Errorf("ping PostgreSQL: %w", err))
	}
	return nil
}
