package adminapi_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
)

// brokenUntilFixed fails every Delete with a permanent error (its config
// names a table that is gone) until fixed.
type brokenUntilFixed struct {
	*recordingDeleter
	fixed atomic.Bool
}

func (b *brokenUntilFixed) Delete(ctx context.Context, req *sdk.DeleteRequest, p sdk.Progress) (*sdk.DeleteResponse, error) {
	if !b.fixed.Load() {
		return nil, sdk.InvalidConfig(sdk.FieldError{Field: "tables", Problem: `relation "orders" does not exist`})
	}
	return b.recordingDeleter.Delete(ctx, req, p)
}

// oneDeleter is a deleter set of one, of any implementation.
type oneDeleter struct {
	name string
	d    sdk.TenantDeleter
}

func (o oneDeleter) DeleterNames() []string { return []string{o.name} }
func (o oneDeleter) Deleter(name string) (sdk.TenantDeleter, error) {
	if name != o.name {
		return nil, fmt.Errorf("no deleter %q", name)
	}
	return o.d, nil
}

func TestRetryRouteRunsABlockedJobAgain(t *testing.T) {
	storetest.Each(t, func(t *testing.T, _ context.Context, st store.Store) {
		tenant, other := uuid.NewString(), uuid.NewString()
		d := &brokenUntilFixed{recordingDeleter: &recordingDeleter{items: map[string]map[string]int64{
			tenant: {"orders": 4}, other: {"orders": 6}}}}
		h, _ := erasureAPI(t, st, oneDeleter{"pg", d})
		path := "/api/v1/tenants/" + tenant + "/deletion"

		code, body, _ := send(t, h, "POST", path+"/retry", nil)
		require.Equal(t, 404, code, "%v", body)
		require.Equal(t, "SYS_TENANT_NOT_FOUND", code2(body))

		code, _, _ = send(t, h, "POST", path, nil)
		require.Equal(t, 202, code)
		testsvc.Eventually(t, 20*time.Second, func() bool {
			_, body, _ := send(t, h, "GET", path, nil)
			return body["status"] == "BLOCKED"
		}, "job BLOCKED")
		_, body, _ = send(t, h, "GET", path, nil)
		require.Nil(t, body["next_attempt_at"])
		require.Equal(t, false, body["verified"])
		require.Equal(t, "BLOCKED", body["deleters"].([]any)[0].(map[string]any)["status"])
		before := d.snapshot()

		code, body, _ = send(t, h, "POST", path+"/retry", `{"now":true}`)
		require.Equal(t, 400, code, "a body is never ignored: %v", body)
		require.Equal(t, before, d.snapshot(), "a refused retry changes nothing")

		d.fixed.Store(true)
		code, body, _ = send(t, h, "POST", path+"/retry", nil)
		require.Equal(t, 202, code, "%v", body)
		require.Equal(t, "PARTIAL", body["status"])
		testsvc.Eventually(t, 20*time.Second, func() bool {
			_, body, _ := send(t, h, "GET", path, nil)
			return body["status"] == "COMPLETED" && body["verified"] == true
		}, "job COMPLETED after the retry")
		// The snapshot is a JSON object, keys in sorted order: compare as JSON
		// (the two ids are random, so either may come first).
		require.JSONEq(t, `{"`+other+`":{"orders":6},"`+tenant+`":{"orders":0}}`, d.snapshot(), "only the tenant's items went")

		code, body, _ = send(t, h, "POST", path+"/retry", nil)
		require.Equal(t, 409, code, "%v", body)
		require.Equal(t, "SYS_TENANT_CONFLICT", code2(body))
		code, body, _ = send(t, h, "POST", "/api/v1/tenants/not-a-uuid/deletion/retry", nil)
		require.Equal(t, 400, code, "%v", body)
	})
}
