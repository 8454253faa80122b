package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/lifecycled/lifecycled/sdk"
)

// Health implements sdk.HealthChecker: PING.
func (d *deleter) Health(ctx context.Context) error {
	d.mu.Lock()
	client := d.client
	d.mu.Unlock()
	if client == nil {
		return sdk.Unavailable(errors.New("not configured"))
	}
	if err := client.Ping(ctx).Err(); err != nil {
		return sdk.Unavailable(fmt.Errorf("PING Redis: %w", err))
	}
	return nil
}
