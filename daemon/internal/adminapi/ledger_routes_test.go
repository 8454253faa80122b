package adminapi_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/adminapi"
	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/ledger"
	"github.com/lifecycled/lifecycled/daemon/internal/receipt"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
)

// TestLedgerRoutes: export, import (idempotent), a tampered or foreign
// file refused with its code and nothing changed, the reverify trigger,
// bad input, and the resurrections on the tenant's job list.
func TestLedgerRoutes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, st store.Store) {
		key, err := receipt.GenerateKey(filepath.Join(t.TempDir(), "k.pem"))
		require.NoError(t, err)
		notary := receipt.NewNotary(key, "d1", func() map[string]receipt.Plugin { return nil })
		require.NoError(t, st.RegisterReceiptKey(ctx, deletion.ReceiptKey{ID: notary.KeyID(), Algorithm: receipt.Algorithm,
			PublicKey: notary.PublicKey(), RegisteredAt: time.Now()}))
		tenant := uuid.NewString()
		entries := []ledger.Entry{{TenantID: tenant, JobID: uuid.New(), ErasedAt: time.Now().UTC(), ReceiptSHA256: ledger.ReceiptHash([]byte("r"))}}
		_, err = st.ImportLedger(ctx, entries, time.Now())
		require.NoError(t, err)
		_, err = st.RecordResurrection(ctx, ledger.Found{Latest: ledger.Latest{TenantID: tenant, JobID: entries[0].JobID,
			ReceiptSHA256: entries[0].ReceiptSHA256}, Counts: map[string]int64{"postgres:app": 2}, At: time.Now()})
		require.NoError(t, err)

		format := func() string { return "uuid" }
		rv := ledger.NewReverifier(st, deletion.NewRegistry(deleterSet{}, func() int { return 1 }), "d1",
			func() ledger.ReverifyConfig { return ledger.ReverifyConfig{Rate: 10} }, nil, hclog.NewNullLogger(), nil, nil)
		lsvc := ledger.NewService(st, st, notary, "d1", format, rv)
		dsvc := deletion.NewService(st, deletion.NewRegistry(deleterSet{}, func() int { return 1 }), nil, deletion.ServiceOptions{
			Config: func() deletion.ServiceConfig { return deletion.ServiceConfig{TenantIDFormat: "uuid"} }})
		h := adminapi.New(adminapi.Options{
			Logger: hclog.NewNullLogger(), Policy: func() adminapi.AccessPolicy { return adminapi.AccessPolicy{} },
			Registry: prometheus.NewRegistry(), Gatherer: prometheus.NewRegistry(),
			Routes: []func(*http.ServeMux){adminapi.TenantRoutesWith(dsvc, lsvc), adminapi.LedgerRoutes(lsvc)},
		}).Handler()

		code, _, file := send(t, h, "GET", "/api/v1/erasures/ledger", nil)
		require.Equal(t, 200, code, "%s", file)
		rep := ledger.Verify(file, func(string) (ed25519.PublicKey, string, error) { return notary.PublicKey(), "t", nil }, nil)
		require.True(t, rep.Valid, "%+v", rep.Checks)
		require.Len(t, rep.Entries, 1)
		code, body, _ := send(t, h, "GET", "/api/v1/erasures/ledger?full=1", nil)
		require.Equal(t, 400, code)
		require.Equal(t, "SYS_TENANT_VALIDATION_ERROR", code2(body))

		before, err := st.LedgerEntries(ctx)
		require.NoError(t, err)
		for name, tc := range map[string]struct {
			body, code string
		}{
			"tampered":    {string(bytes.Replace(file, []byte(tenant), []byte(uuid.NewString()), 1)), "SYS_LEDGER_INVALID"},
			"empty":       {"", "SYS_LEDGER_INVALID"},
			"not json":    {"ledger", "SYS_LEDGER_INVALID"},
			"a receipt":   {`{"type":"lifecycled.erasure-receipt"}`, "SYS_LEDGER_INVALID"},
			"foreign key": {string(foreignLedger(t, entries)), "SYS_LEDGER_KEY_UNKNOWN"},
		} {
			code, body, _ := send(t, h, "POST", "/api/v1/erasures/ledger", tc.body)
			require.Equal(t, 400, code, name)
			require.Equal(t, tc.code, code2(body), name)
		}
		after, err := st.LedgerEntries(ctx)
		require.NoError(t, err)
		require.Equal(t, before, after, "refused files change nothing")

		code, body, _ = send(t, h, "POST", "/api/v1/erasures/ledger", string(file))
		require.Equal(t, 200, code, "%v", body)
		require.Equal(t, map[string]any{"entries": 1.0, "added": 0.0, "already_present": 1.0, "key_id": notary.KeyID()}, body)

		// A ledger larger than the 1 MiB other bodies are held to.
		var many []ledger.Entry
		for i := 0; i < 8000; i++ {
			many = append(many, ledger.Entry{TenantID: uuid.NewString(), JobID: uuid.New(), ErasedAt: time.Now().UTC(),
				ReceiptSHA256: ledger.ReceiptHash([]byte{byte(i)})})
		}
		big, err := ledger.Encode(many, time.Now(), receipt.Daemon{}, notary)
		require.NoError(t, err)
		require.Greater(t, len(big), 1<<20)
		code, body, _ = send(t, h, "POST", "/api/v1/erasures/ledger", string(big))
		require.Equal(t, 200, code, "%v", body)
		require.Equal(t, 8000.0, body["added"])

		code, body, _ = send(t, h, "POST", "/api/v1/erasures/reverify", nil)
		require.Equal(t, 202, code, "%v", body)
		require.Equal(t, true, body["requested"])
		code, body, _ = send(t, h, "POST", "/api/v1/erasures/reverify", `{"now":true}`)
		require.Equal(t, 400, code)
		require.Equal(t, "SYS_TENANT_VALIDATION_ERROR", code2(body))

		code, body, _ = send(t, h, "GET", "/api/v1/tenants/"+tenant+"/deletions", nil)
		require.Equal(t, 200, code, "%v", body)
		rs := body["resurrections"].([]any)
		require.Len(t, rs, 1)
		r := rs[0].(map[string]any)
		require.Equal(t, "REPORTED", r["action"])
		require.Equal(t, entries[0].JobID.String(), r["erasure_job_id"])
		require.Equal(t, map[string]any{"postgres:app": 2.0}, r["counts"])
		require.Nil(t, r["resolved_at"])
		require.Nil(t, r["reerase_job_id"])
		code, body, _ = send(t, h, "GET", "/api/v1/tenants/"+uuid.NewString()+"/deletions", nil)
		require.Equal(t, 200, code)
		require.Equal(t, []any{}, body["resurrections"])
		code, body, _ = send(t, h, "GET", "/api/v1/tenants/not-a-uuid/deletions", nil)
		require.Equal(t, 400, code)
		require.Equal(t, "SYS_TENANT_VALIDATION_ERROR", code2(body))
	})
}

func foreignLedger(t *testing.T, entries []ledger.Entry) []byte {
	t.Helper()
	key, err := receipt.GenerateKey(filepath.Join(t.TempDir(), "other.pem"))
	require.NoError(t, err)
	data, err := ledger.Encode(entries, time.Now(), receipt.Daemon{}, receipt.NewNotary(key, "x", nil))
	require.NoError(t, err)
	return data
}
