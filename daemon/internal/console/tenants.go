package console

import (
	"crypto/subtle"
	"net/http"
	"net/url"
	"strings"

	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/enum"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

func (c *Console) tenantRoutes(mux *http.ServeMux) {
	mux.Handle("GET /ui/tenants", c.secure(c.tenants))
	mux.Handle("GET /ui/tenants/{tenant}", c.secure(c.tenant))
	mux.Handle("GET /ui/tenants/{tenant}/job", c.secure(c.tenantJob))
	mux.Handle("POST /ui/tenants/{tenant}/erase", c.mutation(c.tenantErase))
	mux.Handle("POST /ui/tenants/{tenant}/cancel", c.mutation(c.tenantCancel))
}

// jobStatuses are the job list's filter values.
var jobStatuses = enum.Strings(deletion.JobStatuses)

type tenantsData struct {
	Jobs     []wire.Job
	Next     string
	Status   string
	Statuses []string
}

// tenants is the erasure job list, newest first, with a tenant finder.
func (c *Console) tenants(w http.ResponseWriter, r *http.Request) {
	if t := strings.TrimSpace(r.URL.Query().Get("tenant")); t != "" {
		http.Redirect(w, r, "/ui/tenants/"+url.PathEscape(t), http.StatusSeeOther)
		return
	}
	p := c.newPage(w, r, "Tenants", "tenants")
	d := tenantsData{Status: r.URL.Query().Get("status"), Statuses: jobStatuses}
	q := apiQuery(r.URL.Query(), []string{"status", "cursor"})
	q.Set("limit", "50")
	api, ctx := c.client(w, r)
	jobs, err := api.Deletions(ctx, q)
	p.addErr(err)
	d.Jobs = jobs.Jobs
	if jobs.NextCursor != nil {
		d.Next = *jobs.NextCursor
	}
	p.Data = d
	c.render(w, http.StatusOK, "tenants", p)
}

type tenantData struct {
	Tenant   string
	Counts   *wire.Counts
	Live     jobLive
	Controls erasureControls
}

// Retryable reports whether the job may be run now: a PARTIAL one waits
// for its backoff, a BLOCKED one for an operator.
func (d tenantData) Retryable() bool {
	return d.Live.Job != nil && (d.Live.Job.Status == "PARTIAL" || d.Live.Job.Status == "BLOCKED")
}

// jobLive is the part of the tenant page that refreshes itself while the
// job runs: the job, its cancel button, and the tenant's job list.
type jobLive struct {
	Tenant    string
	Job       *jobView
	Jobs      []wire.Job
	CSRF      formTokens
	CanMutate bool
}

// jobView is a job with what its page needs to know.
type jobView struct {
	wire.Job
	Tenant string
}

// Finished reports whether the job can no longer change by itself.
func (j jobView) Finished() bool { return j.Status == "COMPLETED" || j.Status == "CANCELLED" }

// Cancelling reports whether a cancel was asked of a job that has not
// ended yet: its runner stops it at its deleters' next batch.
func (j jobView) Cancelling() bool { return j.CancelRequestedAt != nil && !j.Finished() }

// InFlight names the deleters still deleting: what a cancel waits for.
func (j jobView) InFlight() []string {
	var names []string
	for _, d := range j.Deleters {
		if d.Status == deletion.DeleterRunning {
			names = append(names, d.Name)
		}
	}
	return names
}

// Active reports whether an erasure of the tenant is under way (a new
// one would be the same job).
func (d tenantData) Active() bool { return d.Live.Job != nil && !d.Live.Job.Finished() }

func (c *Console) loadLive(w http.ResponseWriter, r *http.Request, p *page, tenant string) jobLive {
	l := jobLive{Tenant: tenant, CSRF: p.CSRF, CanMutate: p.CanMutate}
	l.Job = c.loadJob(w, r, p, tenant)
	api, ctx := c.client(w, r)
	jobs, err := api.TenantDeletions(ctx, tenant, nil)
	p.addErr(err)
	l.Jobs = jobs.Jobs
	return l
}

func (c *Console) loadJob(w http.ResponseWriter, r *http.Request, p *page, tenant string) *jobView {
	api, ctx := c.client(w, r)
	j, err := api.Deletion(ctx, tenant)
	if err != nil {
		if adminclient.StatusOf(err) != http.StatusNotFound {
			p.addErr(err)
		}
		return nil
	}
	return &jobView{Job: j, Tenant: tenant}
}

// tenant: what the tenant has per store (per table or key pattern), its
// erasure with live per-deleter progress and the verified report, and the
// form to start one.
func (c *Console) tenant(w http.ResponseWriter, r *http.Request) {
	tenant := r.PathValue("tenant")
	p := c.newPage(w, r, "Tenant "+tenant, "tenants")
	p.Data = c.loadTenant(w, r, p, tenant, true)
	c.render(w, http.StatusOK, "tenant", p)
}

// loadTenant reads what the tenant's page shows; withCounts asks every
// deleter's store for the tenant's items too.
func (c *Console) loadTenant(w http.ResponseWriter, r *http.Request, p *page, tenant string, withCounts bool) tenantData {
	d := tenantData{Tenant: tenant}
	if withCounts {
		api, ctx := c.client(w, r)
		counts, err := api.Counts(ctx, tenant)
		if err != nil {
			p.addErr(err)
		} else {
			d.Counts = &counts
			d.Tenant = counts.TenantID
		}
	}
	d.Live = c.loadLive(w, r, p, d.Tenant)
	d.Controls = c.loadControls(w, r, p, d.Tenant, d.Live.Job)
	return d
}

// tenantJob is the job fragment htmx polls while the job runs.
func (c *Console) tenantJob(w http.ResponseWriter, r *http.Request) {
	tenant := r.PathValue("tenant")
	p := c.newPage(w, r, "", "tenants")
	p.Data = c.loadLive(w, r, p, tenant)
	c.render(w, http.StatusOK, "frag:tenant:live", p)
}

// tenantErase starts an erasure once the operator typed the tenant id:
// the console checks the confirmation again, whatever the browser did.
func (c *Console) tenantErase(w http.ResponseWriter, r *http.Request) {
	tenant := r.PathValue("tenant")
	confirm := strings.TrimSpace(r.PostFormValue("confirm"))
	if subtle.ConstantTimeCompare([]byte(confirm), []byte(tenant)) != 1 {
		p := c.newPage(w, r, "Tenant "+tenant, "tenants")
		p.addErr(&APIError{Status: http.StatusBadRequest, Code: "SYS_CONSOLE_CONFIRMATION_MISMATCH",
			Message: "type the tenant id exactly to confirm the erasure; nothing was started", RequestID: p.RequestID})
		p.Data = tenantData{Tenant: tenant}
		c.render(w, http.StatusBadRequest, "tenant", p)
		return
	}
	api, ctx := c.client(w, r)
	j, err := api.RequestDeletion(ctx, tenant, nil, once(r))
	if err != nil {
		p := c.newPage(w, r, "Tenant "+tenant, "tenants")
		p.addErr(err)
		p.Data = tenantData{Tenant: tenant}
		c.render(w, statusOf(err), "tenant", p)
		return
	}
	http.Redirect(w, r, "/ui/tenants/"+url.PathEscape(j.TenantID)+"?done=started", http.StatusSeeOther)
}

func (c *Console) tenantCancel(w http.ResponseWriter, r *http.Request) {
	tenant := r.PathValue("tenant")
	api, ctx := c.client(w, r)
	if _, err := api.CancelDeletion(ctx, tenant, once(r)); err != nil {
		p := c.newPage(w, r, "Tenant "+tenant, "tenants")
		p.addErr(err)
		p.Data = c.loadTenant(w, r, p, tenant, false)
		c.render(w, statusOf(err), "tenant", p)
		return
	}
	http.Redirect(w, r, "/ui/tenants/"+url.PathEscape(tenant)+"?done=cancel", http.StatusSeeOther)
}
