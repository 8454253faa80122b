package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest"
)

// createIndexedTable creates name keyed by (hash, log_id), with an LSI on
// (hash, at) and, when gsi, a GSI on user_id.
func createIndexedTable(t *testing.T, c *dynamodb.Client, name, hash string, gsi bool) {
	t.Helper()
	ctx := testsvc.Context(t, time.Minute)
	in := &dynamodb.CreateTableInput{
		TableName: aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(hash), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("log_id"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("at"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(hash), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("log_id"), KeyType: types.KeyTypeRange},
		},
		LocalSecondaryIndexes: []types.LocalSecondaryIndex{{
			IndexName: aws.String("by_time"),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(hash), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String("at"), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}},
		BillingMode: types.BillingModePayPerRequest,
	}
	if gsi {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String("user_id"), AttributeType: types.ScalarAttributeTypeS})
		in.GlobalSecondaryIndexes = []types.GlobalSecondaryIndex{{
			IndexName:  aws.String("by_user"),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("user_id"), KeyType: types.KeyTypeHash}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		}}
	}
	_, err := c.CreateTable(ctx, in)
	require.NoError(t, err)
	require.NoError(t, dynamodb.NewTableExistsWaiter(c, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 50 * time.Millisecond }).
		Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute))
}

// createKeyedTable creates name keyed by (hash of type typ, sort), without indexes.
func createKeyedTable(t *testing.T, c *dynamodb.Client, name, hash string, typ types.ScalarAttributeType, sort string) {
	t.Helper()
	ctx := testsvc.Context(t, time.Minute)
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(hash), AttributeType: typ},
			{AttributeName: aws.String(sort), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(hash), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(sort), KeyType: types.KeyTypeRange},
		},
		BillingMode: types.BillingModePayPerRequest,
	})
	require.NoError(t, err)
	require.NoError(t, dynamodb.NewTableExistsWaiter(c, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 50 * time.Millisecond }).
		Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute))
}

func dropTable(t *testing.T, c *dynamodb.Client, name string) {
	t.Helper()
	ctx := testsvc.Context(t, time.Minute)
	_, err := c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	require.NoError(t, err)
	require.NoError(t, dynamodb.NewTableNotExistsWaiter(c, func(o *dynamodb.TableNotExistsWaiterOptions) { o.MinDelay = 50 * time.Millisecond }).
		Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute))
}

func TestDynamoDBPlanQueriesTheHashKeyAndNamesTheIndexes(t *testing.T) {
	t.Parallel()
	endpoint := testsvc.Dynalite(t)
	c := newClient(t, endpoint)
	createIndexedTable(t, c, "events", "tenant_id", true)
	f := &fixture{endpoint: endpoint, c: c, table: "events", keyType: types.ScalarAttributeTypeS}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	put := func(tenant string, n int) {
		for i := 0; i < n; i++ {
			_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("events"), Item: map[string]types.AttributeValue{
				"tenant_id": &types.AttributeValueMemberS{Value: tenant},
				"log_id":    &types.AttributeValueMemberS{Value: fmt.Sprintf("%04d", i)},
				"at":        &types.AttributeValueMemberS{Value: fmt.Sprintf("2025-01-%02d", 1+i%28)},
				"user_id":   &types.AttributeValueMemberS{Value: fmt.Sprintf("u%d", i%3)},
			}})
			require.NoError(t, err)
		}
	}
	put("Acme", 30)
	put("acme", 7)
	put("Acme*", 2)

	d := plugintest.Launch(t, binary(t), sdk.KindTenantDeleter).Deleter(t)
	cfg := map[string]any{"table": "events", "partition_key": "tenant_id", "region": "us-east-1", "endpoint": endpoint,
		"access_key_id": "k", "secret_access_key": "s"}
	configure := func() {
		t.Helper()
		_, err := d.Configure(ctx, &sdk.ConfigureRequest{Name: "dynamodb:events", Config: cfg, TenantIDFormat: `^[A-Za-z*]{1,10}$`})
		require.NoError(t, err)
	}
	plan := func(tenant string) (*sdk.PlanResponse, error) {
		return d.(sdk.Planner).Plan(ctx, &sdk.PlanRequest{TenantID: tenant})
	}
	mustPlan := func(tenant string) *sdk.PlanResponse {
		t.Helper()
		p, err := plan(tenant)
		require.NoError(t, err)
		return p
	}
	sumOther, sumA := f.Checksum(t, "acme"), f.Checksum(t, "Acme")
	configure()
	p := mustPlan("Acme")
	require.Equal(t, []sdk.PlanStep{{Target: "events", Via: "Query on hash key tenant_id (S), items named by tenant_id and sort key log_id (S)", Expected: 30}}, p.Steps)
	require.Equal(t, []string{
		"GSI by_user (user_id): not keyed by the tenant, not queried: its entries go with the table's items",
		"LSI by_time (tenant_id, at): shares the table's hash key; its entries go with the table's items",
	}, p.Notes)
	require.Regexp(t, `^sha256:[0-9a-f]{64}$`, p.Fingerprint)
	other := mustPlan("acme")
	require.Equal(t, int64(7), other.Total())
	require.Equal(t, p.Fingerprint, other.Fingerprint)
	require.Equal(t, int64(0), mustPlan("Acm").Total())
	require.Equal(t, p, mustPlan("Acme"), "stable across calls")

	// Plan changes nothing; after Delete it plans 0, same fingerprint.
	require.Equal(t, sumA, f.Checksum(t, "Acme"), "Plan changes nothing")
	del, err := d.Delete(ctx, &sdk.DeleteRequest{TenantID: "Acme"}, func(int64) {})
	require.NoError(t, err)
	require.Equal(t, p.Total(), del.DeletedCount)
	after := mustPlan("Acme")
	require.Zero(t, after.Total())
	require.Equal(t, p.Fingerprint, after.Fingerprint)
	require.Equal(t, sumOther, f.Checksum(t, "acme"), "the other tenant's items are unchanged")
	require.Equal(t, int64(2), f.Remaining(t, "Acme*"))

	// Tuning leaves the fingerprint; the indexes do not.
	cfg["concurrency"], cfg["max_items_per_second"] = 2, 100
	configure()
	require.Equal(t, p.Fingerprint, mustPlan("acme").Fingerprint)
	dropTable(t, c, "events")
	createIndexedTable(t, c, "events", "tenant_id", false)
	noGSI := mustPlan("acme")
	require.NotEqual(t, p.Fingerprint, noGSI.Fingerprint, "a GSI dropped")
	require.Equal(t, []string{"LSI by_time (tenant_id, at): shares the table's hash key; its entries go with the table's items"}, noGSI.Notes)

	// Recreated with another hash key: Plan fails closed naming it.
	dropTable(t, c, "events")
	createIndexedTable(t, c, "events", "org", true)
	_, err = plan("acme")
	require.ErrorIs(t, err, sdk.ErrInvalidConfig)
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(err))
	require.Contains(t, err.Error(), `the table changed since the deleter was configured`)
	require.Contains(t, err.Error(), `table events is now keyed by "org", not "tenant_id"`)

	// The same hash key name with another type, or another sort key: the same.
	for _, tc := range []struct {
		typ        types.ScalarAttributeType
		sort, want string
	}{
		{types.ScalarAttributeTypeN, "log_id", "the type of partition key tenant_id of table events is now N, was S"},
		{types.ScalarAttributeTypeS, "at", `the sort key of table events is now "at", was "log_id"`},
	} {
		dropTable(t, c, "events")
		createKeyedTable(t, c, "events", "tenant_id", tc.typ, tc.sort)
		_, err = plan("acme")
		require.ErrorIs(t, err, sdk.ErrInvalidConfig)
		require.Contains(t, err.Error(), tc.want)
	}

	// Bad ids fail before anything is read; a missing table is NotFound.
	_, err = plan("acme1")
	require.Error(t, err)
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(err))
	dropTable(t, c, "events")
	_, err = plan("acme")
	require.ErrorIs(t, err, sdk.ErrNotFound)
}
