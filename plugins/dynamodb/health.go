package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lifecycled/lifecycled/sdk"
)

// Health implements sdk.HealthChecker: DescribeTable of the configured
// table, which Configure needs too (so no permission beyond the
// deleter's), and which fails when the endpoint is unreachable, the
// credentials are refused or the table is gone.
func (d *deleter) Health(ctx context.Context) error {
	d.mu.Lock()
	client, table := d.client, d.cfg.Table
	d.mu.Unlock()
	if client == nil {
		return sdk.Unavailable(errors.New("not configured"))
	}
	if _, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}); err != nil {
		return sdk.Unavailable(fmt.Errorf("describe table %s: %w", table, err))
	}
	return nil
}
