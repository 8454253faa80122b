package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/lifecycled/lifecycled/sdk"
)

// Health implements sdk.HealthChecker: a round trip to the server on a
// pooled connection.
func (d *deleter) Health(ctx context.Context) error {
	d.mu.Lock()
	db := d.db
	d.mu.Unlock()
	if db == nil {
		return sdk.Unavailable(errors.New("not configured"))
	}
	if err := db.PingContext(ctx); err != nil {
		return sdk.Unavailable(fmt.Errorf("ping MySQL: %w", err))
	}
	return nil
}
