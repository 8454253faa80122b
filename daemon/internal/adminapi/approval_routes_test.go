package adminapi_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/receipt"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
	"github.com/lifecycled/lifecycled/sdk"
)

const (
	requester = 1001
	approver  = 1002
)

// TestApprovalTwoPersonRule: under require_approval and
// approvers_distinct a job waits until another uid than the requester's
// approves the plan it read; the requester, an unknown uid, a stale plan
// hash and an incomplete plan are refused with their codes, and nothing is
// deleted until the approval. The receipt records both people and the plan.
func TestApprovalTwoPersonRule(t *testing.T) {
	storetest.Each(t, func(t *testing.T, _ context.Context, st store.Store) {
		a, b := uuid.NewString(), uuid.NewString()
		sql, kv, set := twoTenants(a, b)
		h, pub := planAPI(t, st, set, approvalConfig{require: true, distinct: true})
		before := sql.snapshot() + kv.snapshot()

		sc, job := sendAs(t, h, requester, "POST", "/api/v1/tenants/"+a+"/deletion", nil)
		require.Equal(t, 202, sc, "%v", job)
		require.Equal(t, "AWAITING_APPROVAL", job["status"])
		require.Equal(t, true, job["approval_required"])
		require.Equal(t, float64(requester), job["requested_by_uid"])
		require.Nil(t, job["next_attempt_at"])
		_, plan := sendAs(t, h, approver, "GET", "/api/v1/tenants/"+a+"/plan", nil)
		hash := plan["plan_hash"].(string)
		require.Equal(t, hash, job["plan_hash"])

		// The list filter knows the status; the job is not claimed.
		sc, page := sendAs(t, h, approver, "GET", "/api/v1/deletions?status=awaiting_approval", nil)
		require.Equal(t, 200, sc, "%v", page)
		require.Len(t, page["jobs"], 1)
		time.Sleep(300 * time.Millisecond)
		require.Equal(t, before, sql.snapshot()+kv.snapshot(), "nothing deleted before the approval")

		approve := "/api/v1/tenants/" + a + "/deletion/approve"
		for name, tc := range map[string]struct {
			uid  int
			body any
			code int
			want string
		}{
			"the requester":     {requester, map[string]any{"plan_hash": hash}, 403, "SYS_TENANT_APPROVER_NOT_DISTINCT"},
			"an unknown uid":    {-1, map[string]any{"plan_hash": hash}, 403, "SYS_TENANT_APPROVER_NOT_DISTINCT"},
			"no body":           {approver, nil, 400, "SYS_TENANT_VALIDATION_ERROR"},
			"no hash":           {approver, map[string]any{}, 400, "SYS_TENANT_VALIDATION_ERROR"},
			"not a hash":        {approver, map[string]any{"plan_hash": "latest"}, 400, "SYS_TENANT_VALIDATION_ERROR"},
			"an unknown member": {approver, map[string]any{"plan_hash": hash, "force": true}, 400, "SYS_TENANT_VALIDATION_ERROR"},
		} {
			sc, body := sendAs(t, h, tc.uid, "POST", approve, tc.body)
			require.Equal(t, tc.code, sc, "%s: %v", name, body)
			require.Equal(t, tc.want, code(body), name)
		}

		// The schema changes after the approver read the plan: their hash
		// is stale, and the refusal names what changed.
		sql.schemaChange("public.invoices", "tenant column tenant_id", map[string]int64{a: 4, b: 6})
		before = sql.snapshot() + kv.snapshot()
		sc, body := sendAs(t, h, approver, "POST", approve, map[string]any{"plan_hash": hash})
		require.Equal(t, 409, sc, "%v", body)
		require.Equal(t, "SYS_TENANT_PLAN_CHANGED", code(body))
		require.Contains(t, errMessage(body), "new target public.invoices")

		sql.failPlans(sdk.Unavailable(fmt.Errorf("connection refused")))
		sc, body = sendAs(t, h, approver, "POST", approve, map[string]any{"plan_hash": hash})
		require.Equal(t, 409, sc, "%v", body)
		require.Equal(t, "SYS_TENANT_PLAN_INCOMPLETE", code(body))
		sql.failPlans(nil)

		_, job = sendAs(t, h, approver, "GET", "/api/v1/tenants/"+a+"/deletion", nil)
		require.Equal(t, "AWAITING_APPROVAL", job["status"], "refusals change nothing")
		require.Nil(t, job["approved_by_uid"])
		require.Equal(t, before, sql.snapshot()+kv.snapshot())

		// The approver reads the plan again and approves it.
		_, plan = sendAs(t, h, approver, "GET", "/api/v1/tenants/"+a+"/plan", nil)
		fresh := plan["plan_hash"].(string)
		require.NotEqual(t, hash, fresh)
		sc, job = sendAs(t, h, approver, "POST", approve, map[string]any{"plan_hash": fresh})
		require.Equal(t, 200, sc, "%v", job)
		require.Equal(t, float64(approver), job["approved_by_uid"])
		require.Equal(t, fresh, job["plan_hash"])
		require.NotEqual(t, "AWAITING_APPROVAL", job["status"])

		done := waitStatus(t, h, a, "COMPLETED")
		require.Equal(t, true, done["verified"])
		var rows map[string]map[string]int64
		require.NoError(t, json.Unmarshal([]byte(sql.snapshot()), &rows))
		require.Equal(t, map[string]map[string]int64{
			a: {"public.invoices": 0, "public.order_lines": 0, "public.orders": 0},
			b: {"public.invoices": 6, "public.order_lines": 5, "public.orders": 2},
		}, rows, "a's rows are gone, b's are as they were")

		// Approving again: nothing awaits approval.
		sc, body = sendAs(t, h, approver, "POST", approve, map[string]any{"plan_hash": fresh})
		require.Equal(t, 409, sc, "%v", body)
		require.Equal(t, "SYS_TENANT_CONFLICT", code(body))

		sc, _, raw := send(t, h, "GET", "/api/v1/tenants/"+a+"/deletion/receipt", nil)
		require.Equal(t, 200, sc)
		rep := receipt.Verify(raw, func(string) (ed25519.PublicKey, string, error) { return pub, "test", nil }, receipt.Options{})
		require.True(t, rep.Valid, "%+v", rep.Checks)
		require.Equal(t, int64(requester), *rep.Doc.RequestedByUID)
		require.Equal(t, int64(approver), *rep.Doc.Approval.ApprovedByUID)
		require.True(t, rep.Doc.Approval.Required)
		require.Equal(t, fresh, *rep.Doc.PlanHash)
	})
}

func TestApproveWithoutAJob(t *testing.T) {
	storetest.Each(t, func(t *testing.T, _ context.Context, st store.Store) {
		a, b := uuid.NewString(), uuid.NewString()
		_, _, set := twoTenants(a, b)
		h, _ := planAPI(t, st, set, approvalConfig{require: true})
		_, plan := sendAs(t, h, approver, "GET", "/api/v1/tenants/"+a+"/plan", nil)
		sc, body := sendAs(t, h, approver, "POST", "/api/v1/tenants/"+a+"/deletion/approve", map[string]any{"plan_hash": plan["plan_hash"]})
		require.Equal(t, 404, sc, "%v", body)
		require.Equal(t, "SYS_TENANT_NOT_FOUND", code(body))
		sc, body = sendAs(t, h, approver, "POST", "/api/v1/tenants/nope/deletion/approve", map[string]any{"plan_hash": plan["plan_hash"]})
		require.Equal(t, 400, sc, "%v", body)
	})
}

// TestCancelAwaitingApproval: a job waiting for approval can be cancelled,
// and then cannot be approved.
func TestCancelAwaitingApproval(t *testing.T) {
	storetest.Each(t, func(t *testing.T, _ context.Context, st store.Store) {
		a, b := uuid.NewString(), uuid.NewString()
		sql, kv, set := twoTenants(a, b)
		h, _ := planAPI(t, st, set, approvalConfig{require: true})
		before := sql.snapshot() + kv.snapshot()
		sc, job := sendAs(t, h, requester, "POST", "/api/v1/tenants/"+a+"/deletion", nil)
		require.Equal(t, 202, sc, "%v", job)
		require.Equal(t, "AWAITING_APPROVAL", job["status"])
		sc, job = sendAs(t, h, requester, "POST", "/api/v1/tenants/"+a+"/deletion/cancel", nil)
		require.Equal(t, 200, sc, "%v", job)
		require.Equal(t, "CANCELLED", job["status"])
		sc, body := sendAs(t, h, approver, "POST", "/api/v1/tenants/"+a+"/deletion/approve", map[string]any{"plan_hash": job["plan_hash"]})
		require.Equal(t, 409, sc, "%v", body)
		require.Equal(t, "SYS_TENANT_CONFLICT", code(body))
		time.Sleep(200 * time.Millisecond)
		require.Equal(t, before, sql.snapshot()+kv.snapshot())
		// Without approvers_distinct the requester may approve a new job.
		_, job = sendAs(t, h, requester, "POST", "/api/v1/tenants/"+a+"/deletion", nil)
		require.Equal(t, "AWAITING_APPROVAL", job["status"])
		sc, job = sendAs(t, h, requester, "POST", "/api/v1/tenants/"+a+"/deletion/approve", map[string]any{"plan_hash": job["plan_hash"]})
		require.Equal(t, 200, sc, "%v", job)
		waitStatus(t, h, a, "COMPLETED")
	})
}

// TestPlanDriftBetweenApprovalAndRun: the plan changes after the job was
// approved and before it starts (a grace period here). The runner sees it
// at start, deletes nothing and sends the job back for approval, naming
// the new table; approving the new plan lets it run.
func TestPlanDriftBetweenApprovalAndRun(t *testing.T) {
	storetest.Each(t, func(t *testing.T, _ context.Context, st store.Store) {
		a, b := uuid.NewString(), uuid.NewString()
		sql, kv, set := twoTenants(a, b)
		h, _ := planAPI(t, st, set, approvalConfig{})
		_, plan := sendAs(t, h, requester, "GET", "/api/v1/tenants/"+a+"/plan", nil)
		hash := plan["plan_hash"].(string)
		later := time.Now().Add(1500 * time.Millisecond).UTC().Format(time.RFC3339Nano)
		sc, job := sendAs(t, h, requester, "POST", "/api/v1/tenants/"+a+"/deletion", map[string]any{"plan_hash": hash, "not_before": later})
		require.Equal(t, 202, sc, "%v", job)
		require.Equal(t, "SCHEDULED", job["status"])
		require.Equal(t, false, job["approval_required"])

		sql.schemaChange("public.invoices", "tenant column tenant_id", map[string]int64{a: 4, b: 6})
		before := sql.snapshot() + kv.snapshot()
		job = waitStatus(t, h, a, "AWAITING_APPROVAL")
		require.Contains(t, job["plan_drift"], "postgres:app: new target public.invoices (via tenant column tenant_id)")
		require.Contains(t, job["plan_drift"], "nothing was deleted")
		require.Equal(t, job["plan_drift"], job["last_error"])
		require.Equal(t, hash, job["plan_hash"], "still held to the plan it was approved for")
		require.Equal(t, before, sql.snapshot()+kv.snapshot(), "nothing was deleted, in any deleter")

		_, plan = sendAs(t, h, approver, "GET", "/api/v1/tenants/"+a+"/plan", nil)
		sc, job = sendAs(t, h, approver, "POST", "/api/v1/tenants/"+a+"/deletion/approve", map[string]any{"plan_hash": plan["plan_hash"]})
		require.Equal(t, 200, sc, "%v", job)
		require.Empty(t, job["plan_drift"])
		done := waitStatus(t, h, a, "COMPLETED")
		require.Equal(t, true, done["verified"])
		require.Contains(t, sql.snapshot(), fmt.Sprintf(`%q:{"public.invoices":6,"public.order_lines":5,"public.orders":2}`, b))
		require.Contains(t, kv.snapshot(), fmt.Sprintf(`%q:{"session:{tenant}:*":4}`, b))
	})
}

// TestPlanRefusalSendsTheJobBack: a deleter that refuses to plan because
// its store no longer matches its config (an invalid-config error) stops a
// job held to a plan before anything is deleted; without a plan to compare
// with (the refusal came before the job was created) it is that deleter's
// permanent failure, BLOCKED as a failed count is; one whose store is down
// fails on its own while the others run, as before plans existed.
func TestPlanRefusalSendsTheJobBack(t *testing.T) {
	storetest.Each(t, func(t *testing.T, _ context.Context, st store.Store) {
		a, b := uuid.NewString(), uuid.NewString()
		sql, kv, set := twoTenants(a, b)
		h, _ := planAPI(t, st, set, approvalConfig{})
		before := sql.snapshot() + kv.snapshot()
		later := time.Now().Add(1500 * time.Millisecond).UTC().Format(time.RFC3339Nano)
		sc, job := sendAs(t, h, requester, "POST", "/api/v1/tenants/"+a+"/deletion", map[string]any{"not_before": later})
		require.Equal(t, 202, sc, "%v", job)
		require.NotNil(t, job["plan_hash"])
		refusal := sdk.InvalidConfig(sdk.FieldError{Field: "tables", Problem: "table public.invoices has the tenant column but is not listed"})
		sql.failPlans(refusal)
		job = waitStatus(t, h, a, "AWAITING_APPROVAL")
		require.Contains(t, job["plan_drift"], "postgres:app refused to plan")
		require.Contains(t, job["plan_drift"], "public.invoices")
		require.Equal(t, before, sql.snapshot()+kv.snapshot(), "nothing was deleted, in any deleter")

		// Requested while the deleter already refuses: no plan to hold
		// the job to, and the refusal blocks that deleter.
		other := uuid.NewString()
		sql.mu.Lock()
		sql.items[other] = map[string]int64{"public.orders": 2}
		sql.mu.Unlock()
		sc, job = sendAs(t, h, requester, "POST", "/api/v1/tenants/"+other+"/deletion", nil)
		require.Equal(t, 202, sc, "%v", job)
		require.Nil(t, job["plan_hash"], "no complete plan: none to hold the job to")
		job = waitStatus(t, h, other, "BLOCKED")
		require.Contains(t, fmt.Sprint(job["report"]), "public.invoices")
		require.Contains(t, sql.snapshot(), fmt.Sprintf(`%q:{"public.orders":2}`, other))

		// The operator fixes the config; the store goes down instead.
		sql.failPlans(sdk.Unavailable(fmt.Errorf("connection refused")))
		sc, body := sendAs(t, h, approver, "POST", "/api/v1/tenants/"+a+"/deletion/approve", map[string]any{"plan_hash": "sha256:" + strings.Repeat("0", 64)})
		require.Equal(t, 409, sc, "%v", body)
		require.Equal(t, "SYS_TENANT_PLAN_INCOMPLETE", code(body))
		sql.failPlans(nil)
		_, plan := sendAs(t, h, approver, "GET", "/api/v1/tenants/"+a+"/plan", nil)
		sc, job = sendAs(t, h, approver, "POST", "/api/v1/tenants/"+a+"/deletion/approve", map[string]any{"plan_hash": plan["plan_hash"]})
		require.Equal(t, 200, sc, "%v", job)
		waitStatus(t, h, a, "COMPLETED")

		// A second tenant while the planner's store is down: the other
		// deleter runs, the planner's part fails and is retried.
		sql.failPlans(sdk.Unavailable(fmt.Errorf("connection refused")))
		sc, job = sendAs(t, h, requester, "POST", "/api/v1/tenants/"+b+"/deletion", nil)
		require.Equal(t, 202, sc, "%v", job)
		job = waitStatus(t, h, b, "PARTIAL")
		require.Contains(t, job["last_error"], "plan before delete")
		require.Contains(t, kv.snapshot(), fmt.Sprintf(`%q:{"session:{tenant}:*":0}`, b))
		require.Contains(t, sql.snapshot(), fmt.Sprintf(`%q:{"public.order_lines":5,"public.orders":2}`, b))
		sql.failPlans(nil)
		waitStatus(t, h, b, "COMPLETED")

		// A deleter refusing the tenant id (not its config) fails alone too,
		// BLOCKED as a permanent count failure would leave it: that is no
		// change of the plan for an approver to look at.
		c := uuid.NewString()
		sql.mu.Lock()
		sql.items[c] = map[string]int64{"public.orders": 1}
		sql.mu.Unlock()
		kv.mu.Lock()
		kv.items[c] = map[string]int64{"session:{tenant}:*": 3}
		kv.mu.Unlock()
		sql.failPlans(sdk.InvalidArgument("tenant id %q does not fit column tenant_id", c))
		sc, job = sendAs(t, h, requester, "POST", "/api/v1/tenants/"+c+"/deletion", nil)
		require.Equal(t, 202, sc, "%v", job)
		job = waitStatus(t, h, c, "BLOCKED")
		require.Contains(t, fmt.Sprint(job["report"]), "does not fit column")
		require.Contains(t, kv.snapshot(), fmt.Sprintf(`%q:{"session:{tenant}:*":0}`, c))
		require.Contains(t, sql.snapshot(), fmt.Sprintf(`%q:{"public.orders":1}`, c))
	})
}
