package console

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

// The erasure actions an incident needs beside start and cancel: run a
// failed job now, approve the plan it waits on, and put the tenant under
// a legal hold or release it. Each is the API's route with the console's
// session uid, so the API's checks (plan hash, distinct approver, hold
// reason) decide, and its refusals are shown on the tenant's page.

func (c *Console) erasureActionRoutes(mux *http.ServeMux) {
	mux.Handle("POST /ui/tenants/{tenant}/retry", c.mutation(c.tenantAction("retried-now",
		func(ctx context.Context, api *adminclient.Client, r *http.Request, tenant string, opt adminclient.Option) error {
			_, err := api.RetryDeletion(ctx, tenant, opt)
			return err
		})))
	mux.Handle("POST /ui/tenants/{tenant}/approve", c.mutation(c.tenantAction("approved",
		func(ctx context.Context, api *adminclient.Client, r *http.Request, tenant string, opt adminclient.Option) error {
			// The hash the page showed: the daemon refuses it if the plan
			// changed since, so what is approved is what was read.
			hash := strings.TrimSpace(r.PostFormValue("plan_hash"))
			_, err := api.Approve(ctx, tenant, wire.ApproveRequest{PlanHash: &hash}, opt)
			return err
		})))
	mux.Handle("POST /ui/tenants/{tenant}/hold", c.mutation(c.tenantAction("held",
		func(ctx context.Context, api *adminclient.Client, r *http.Request, tenant string, opt adminclient.Option) error {
			reason := r.PostFormValue("reason")
			_, err := api.Hold(ctx, tenant, wire.HoldRequest{Reason: &reason}, opt)
			return err
		})))
	mux.Handle("POST /ui/tenants/{tenant}/release", c.mutation(c.tenantAction("released",
		func(ctx context.Context, api *adminclient.Client, r *http.Request, tenant string, opt adminclient.Option) error {
			_, err := api.Release(ctx, tenant, opt)
			return err
		})))
}

type tenantCall func(ctx context.Context, api *adminclient.Client, r *http.Request, tenant string, opt adminclient.Option) error

// tenantAction runs call and goes back to the tenant's page with the
// notice done, or shows the page again with the API's refusal.
func (c *Console) tenantAction(done string, call tenantCall) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tenant := r.PathValue("tenant")
		api, ctx := c.client(w, r)
		if err := call(ctx, api, r, tenant, once(r)); err != nil {
			p := c.newPage(w, r, "Tenant "+tenant, "tenants")
			p.addErr(err)
			p.Data = c.loadTenant(w, r, p, tenant, false)
			c.render(w, statusOf(err), "tenant", p)
			return
		}
		http.Redirect(w, r, "/ui/tenants/"+url.PathEscape(tenant)+"?done="+done, http.StatusSeeOther)
	}
}

// erasureControls is what the tenant's page offers beside the job: its
// legal hold and, while the job waits for an approval, the plan to approve.
type erasureControls struct {
	Hold *wire.Hold
	// Plan is read only for a job awaiting approval: planning asks every
	// deleter's store.
	Plan *wire.Plan
}

func (c *Console) loadControls(w http.ResponseWriter, r *http.Request, p *page, tenant string, job *jobView) erasureControls {
	var ec erasureControls
	api, ctx := c.client(w, r)
	if h, err := api.HoldOf(ctx, tenant); err == nil {
		ec.Hold = &h
	} else if adminclient.StatusOf(err) != http.StatusNotFound {
		p.addErr(err)
	}
	if job != nil && job.Status == "AWAITING_APPROVAL" {
		plan, err := api.Plan(ctx, tenant)
		if err != nil {
			p.addErr(err)
		} else {
			ec.Plan = &plan
		}
	}
	return ec
}
