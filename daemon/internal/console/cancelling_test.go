package console

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/wire"
)

func ptr[T any](v T) *T { return &v }

func renderPage(t *testing.T, name string, data any) string {
	t.Helper()
	rec := httptest.NewRecorder()
	New(Options{}).render(rec, 200, name, &page{Title: name, Data: data, CanMutate: true})
	require.Equal(t, 200, rec.Code, rec.Body.String())
	return rec.Body.String()
}

// A cancel asked of a running erasure says what it waits for: the
// deleters still in their batch; none: it ends at the next pass.
func TestACancellingErasureSaysWhatItWaitsFor(t *testing.T) {
	job := wire.Job{Status: "RUNNING", PlanHash: ptr("sha256:9f2c51ab0000"), CancelRequestedAt: ptr("2026-11-29T10:00:00Z"), CancelledByUID: ptr(int64(1002)),
		Deleters: []wire.DeleterProgress{{Name: "postgres:orders", Status: "RUNNING"}, {Name: "redis:sessions", Status: "SUCCEEDED"}}}
	body := renderPage(t, "tenant", tenantData{Tenant: "t1", Live: jobLive{Tenant: "t1", Job: &jobView{Job: job, Tenant: "t1"}, CanMutate: true}})
	require.Contains(t, body, `id="cancel-pending"`)
	require.NotContains(t, body, `id="cancel-erasure"`, "no second cancel")
	require.Contains(t, body, "Waiting for postgres:orders to reach the end of the batch it is deleting")
	require.NotContains(t, body, "redis:sessions to reach")
	require.Contains(t, body, "(uid 1002)")
	require.Contains(t, body, "held to plan <code>sha256:9f2c51ab0000…</code>")
	require.NotContains(t, body, "%!", "no value printed with a wrong verb")

	job.Deleters[0].Status = "PENDING"
	body = renderPage(t, "tenant", tenantData{Tenant: "t1", Live: jobLive{Tenant: "t1", Job: &jobView{Job: job, Tenant: "t1"}}})
	require.Contains(t, body, "Nothing is being deleted now: the job ends CANCELLED at the runner's next pass.")

	job.Status = "CANCELLED"
	body = renderPage(t, "tenant", tenantData{Tenant: "t1", Live: jobLive{Tenant: "t1", Job: &jobView{Job: job, Tenant: "t1"}}})
	require.NotContains(t, body, `id="cancel-pending"`, "an ended job is not cancelling")
}

// A cancel asked of a running bulk operation says who holds it and how
// many messages may still be under way; the cancel button is gone.
func TestACancellingOperationSaysWhatItWaitsFor(t *testing.T) {
	op := wire.Operation{ID: "op1", Action: "retry", State: "RUNNING", Matched: 1000, Done: 250, CancelRequestedAt: ptr("2026-11-29T10:00:00Z"),
		CancelledByUID: ptr(uint32(1002)), Daemon: "host-a:4242", InFlightAtMost: 1000}
	body := renderPage(t, "operation", operationData{Op: operationJSON{op}, CanMutate: true})
	require.Contains(t, body, `id="op-cancel-pending"`)
	require.Contains(t, body, "Daemon <code>host-a:4242</code> reads no new page")
	require.Contains(t, body, "at most 1000 messages")
	require.NotContains(t, body, `id="cancel-op"`, "no second cancel")

	op.Daemon = ""
	body = renderPage(t, "operation", operationData{Op: operationJSON{op}, CanMutate: true})
	require.Contains(t, body, "No daemon holds the operation now")

	op.State = "CANCELLED"
	body = renderPage(t, "operation", operationData{Op: operationJSON{op}, CanMutate: true})
	require.NotContains(t, body, `id="op-cancel-pending"`)
}
