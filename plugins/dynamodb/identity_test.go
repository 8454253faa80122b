package main

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest"
)

// TestDynamoDBFingerprintNamesWhereTheTableIs: the fingerprint covered the
// table's name, key schema and indexes only, so a deleter repointed at
// another endpoint holding a table of the same name and schema kept the
// plan an operator approved for the first (found by an outside attack).
// It now names the endpoint, region and table ARN: two endpoints give two
// fingerprints, one the same from any process, and a Delete checked
// against the first table's plan refuses the second, deleting nothing.
// A table changed after the check (an index dropped) is refused as well.
func TestDynamoDBFingerprintNamesWhereTheTableIs(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var fs []*fixture
	for range 2 {
		endpoint := testsvc.Dynalite(t)
		c := newClient(t, endpoint)
		createIndexedTable(t, c, "events", "tenant_id", true)
		f := &fixture{endpoint: endpoint, c: c, table: "events", keyType: types.ScalarAttributeTypeS}
		f.Seed(t, "a", 5)
		f.Seed(t, "b", 3)
		fs = append(fs, f)
	}
	configure := func(d sdk.TenantDeleter, f *fixture) {
		t.Helper()
		_, err := d.Configure(ctx, &sdk.ConfigureRequest{Name: "dynamodb:events", Config: map[string]any{"table": "events", "partition_key": "tenant_id",
			"region": "us-east-1", "endpoint": f.endpoint, "access_key_id": "k", "secret_access_key": "s"}, TenantIDFormat: `^[a-z]+$`})
		require.NoError(t, err)
	}
	launch := func(f *fixture) sdk.TenantDeleter {
		d := plugintest.Launch(t, binary(t), sdk.KindTenantDeleter).Deleter(t)
		configure(d, f)
		return d
	}
	plan := func(d sdk.TenantDeleter) string {
		t.Helper()
		p, err := d.(sdk.Planner).Plan(ctx, &sdk.PlanRequest{TenantID: "a"})
		require.NoError(t, err)
		return p.Fingerprint
	}
	sums := func() []string {
		return []string{fs[0].Checksum(t, "a"), fs[0].Checksum(t, "b"), fs[1].Checksum(t, "a"), fs[1].Checksum(t, "b")}
	}
	d := launch(fs[0])
	fpOne := plan(d)
	require.NotEqual(t, fpOne, plan(launch(fs[1])), "the same table on two endpoints")
	require.Equal(t, fpOne, plan(launch(fs[0])), "the same table from another process")

	before := sums()
	configure(d, fs[1])
	_, err := d.Delete(ctx, &sdk.DeleteRequest{TenantID: "a", PlanFingerprint: fpOne}, nil)
	require.Error(t, err)
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(err))
	require.Contains(t, err.Error(), `new: store endpoint "`+fs[1].endpoint+`"`)
	require.Equal(t, before, sums(), "nothing deleted anywhere")

	// The table changed after the check: a GSI dropped.
	configure(d, fs[0])
	checked := plan(d)
	require.Equal(t, fpOne, checked)
	dropTable(t, fs[0].c, "events")
	createIndexedTable(t, fs[0].c, "events", "tenant_id", false)
	fs[0].Seed(t, "a", 2)
	_, err = d.Delete(ctx, &sdk.DeleteRequest{TenantID: "a", PlanFingerprint: checked}, nil)
	require.Error(t, err)
	require.Contains(t, err.Error(), `gone: GSI "by_user"`)
	require.Equal(t, int64(2), fs[0].Remaining(t, "a"))

	// Checked again: deleted; without a fingerprint, not checked.
	resp, err := d.Delete(ctx, &sdk.DeleteRequest{TenantID: "a", PlanFingerprint: plan(d)}, nil)
	require.NoError(t, err)
	require.Equal(t, int64(2), resp.DeletedCount)
	configure(d, fs[1])
	resp, err = d.Delete(ctx, &sdk.DeleteRequest{TenantID: "a", PlanFingerprint: ""}, nil)
	require.NoError(t, err)
	require.Equal(t, int64(5), resp.DeletedCount)
	require.Equal(t, before[3], fs[1].Checksum(t, "b"), "tenant b's items stay")
}
