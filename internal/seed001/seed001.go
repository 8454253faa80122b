// Package seed001 holds the stores of seed 001 that the tests, the
// benchmarks and the demo erase tenants from: three FK-linked workflow
// tables in PostgreSQL and a DynamoDB audit-log table. One definition, so
// that what the plugin tests prove is what the end-to-end tests, the demo
// and the benchmarks exercise.
package seed001

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/jackc/pgx/v5/pgconn"
)

// WorkflowSchema creates steps -> instances -> definitions with tenant_id of
// the given SQL type and an index on every tenant and FK column.
func WorkflowSchema(tenantType string) string {
	return fmt.Sprintf(`
CREATE TABLE workflow_definitions (id bigserial PRIMARY KEY, tenant_id %[1]s NOT NULL, name text);
CREATE INDEX ON workflow_definitions (tenant_id);
CREATE TABLE workflow_instances (id bigserial PRIMARY KEY, tenant_id %[1]s NOT NULL,
	definition_id bigint NOT NULL REFERENCES workflow_definitions (id));
CREATE INDEX ON workflow_instances (tenant_id);
CREATE INDEX ON workflow_instances (definition_id);
CREATE TABLE workflow_steps (id bigserial PRIMARY KEY, tenant_id %[1]s NOT NULL,
	instance_id bigint NOT NULL REFERENCES workflow_instances (id));
CREATE INDEX ON workflow_steps (tenant_id);
CREATE INDEX ON workflow_steps (instance_id);
`, tenantType)
}

// Execer is a pgx pool, connection or transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// SeedWorkflows gives tenant n instances with one step each and one
// definition per ten instances, and returns how many rows that is.
func SeedWorkflows(ctx context.Context, db Execer, tenant string, n int) (int64, error) {
	defs := (n + 9) / 10
	_, err := db.Exec(ctx, `
		WITH d AS (INSERT INTO workflow_definitions (tenant_id, name) SELECT $1, 'def' FROM generate_series(1, $3) RETURNING id),
		     dn AS (SELECT id, row_number() OVER (ORDER BY id) - 1 AS rn FROM d),
		     i AS (INSERT INTO workflow_instances (tenant_id, definition_id)
		           SELECT $1, dn.id FROM generate_series(1, $2) g JOIN dn ON dn.rn = g % $3 RETURNING id)
		INSERT INTO workflow_steps (tenant_id, instance_id) SELECT $1, id FROM i`, tenant, n, defs)
	if err != nil {
		return 0, fmt.Errorf("seed workflows of %s: %w", tenant, err)
	}
	return int64(2*n + defs), nil
}

// CreateAuditLogTable creates an on-demand table keyed by tenant_id (hash)
// and log_id (range), and waits until it exists.
func CreateAuditLogTable(ctx context.Context, c *dynamodb.Client, name string) error {
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("tenant_id"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("log_id"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("tenant_id"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("log_id"), KeyType: types.KeyTypeRange},
		},
		BillingMode: types.BillingModePayPerRequest,
	})
	if err != nil {
		return fmt.Errorf("create table %s: %w", name, err)
	}
	return dynamodb.NewTableExistsWaiter(c, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 50 * time.Millisecond
	}).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute)
}

// PutAuditLogs writes n items for tenant, log_id 00000000 upwards, 25 per
// BatchWriteItem, until none is left unprocessed.
func PutAuditLogs(ctx context.Context, c *dynamodb.Client, table, tenant string, n int) error {
	for start := 0; start < n; start += 25 {
		var reqs []types.WriteRequest
		for i := start; i < min(start+25, n); i++ {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
				"tenant_id": &types.AttributeValueMemberS{Value: tenant},
				"log_id":    &types.AttributeValueMemberS{Value: fmt.Sprintf("%08d", i)},
				"action":    &types.AttributeValueMemberS{Value: "login"},
			}}})
		}
		for len(reqs) > 0 {
			out, err := c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}})
			if err != nil {
				return fmt.Errorf("put audit logs of %s: %w", tenant, err)
			}
			reqs = out.UnprocessedItems[table]
		}
	}
	return nil
}
