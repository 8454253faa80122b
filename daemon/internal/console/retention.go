package console

import (
	"net/http"
	"net/url"

	"github.com/lifecycled/lifecycled/daemon/internal/adminapi"
)

func (c *Console) retentionRoutes(mux *http.ServeMux) {
	mux.Handle("GET /ui/retention", c.secure(c.retention))
	mux.Handle("POST /ui/retention/run", c.mutation(c.retentionRun))
}

type retentionData struct {
	Result *adminapi.ArchiveRunBody
	DryRun bool
}

func (c *Console) retention(w http.ResponseWriter, r *http.Request) {
	p := c.newPage(w, r, "Retention", "retention")
	p.Data = retentionData{}
	c.render(w, http.StatusOK, "retention", p)
}

// retentionRun runs a retention pass now, or its dry run (counts only).
func (c *Console) retentionRun(w http.ResponseWriter, r *http.Request) {
	p := c.newPage(w, r, "Retention", "retention")
	d := retentionData{DryRun: r.PostFormValue("dry_run") == "1"}
	q := url.Values{}
	if d.DryRun {
		q.Set("dry_run", "true")
	}
	var res adminapi.ArchiveRunBody
	status := http.StatusOK
	if _, err := c.call(w, r, http.MethodPost, "/api/v1/archive/run", q, nil, &res); err != nil {
		p.addErr(err)
		status = statusOf(err)
	} else {
		d.Result = &res
	}
	p.Data = d
	c.render(w, status, "retention", p)
}
