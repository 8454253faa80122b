package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/lifecycled/lifecycled/sdk"
)

// Health implements sdk.HealthChecker: a round trip to the database on a
// pooled connection (one it opens when none is idle: a refused login or a
// database gone shows here too).
func (d *deleter) Health(ctx context.Context) error {
	d.mu.Lock()
	pool := d.pool
	d.mu.Unlock()
	if pool == nil {
		return sdk.Unavailable(errors.New("not configured"))
	}
	if err := pool.Ping(ctx); err != nil {
		return sdk.Unavailable(fmt.Errorf("ping PostgreSQL: %w", err))
	}
	return nil
}
