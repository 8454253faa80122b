package console

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/wire"
)

func (c *Console) retentionRoutes(mux *http.ServeMux) {
	mux.Handle("GET /ui/retention", c.secure(c.retention))
	mux.Handle("POST /ui/retention/run", c.mutation(c.retentionRun))
}

type retentionData struct {
	Status wire.ArchiveStatus
	Result *wire.ArchiveRun
	DryRun bool
}

// Days is a number of seconds in days, for the settings line.
func (retentionData) Days(s float64) string { return strconv.FormatFloat(s/86400, 'f', -1, 64) }

// Every is an interval in seconds, as a duration.
func (retentionData) Every(s float64) string { return (time.Duration(s) * time.Second).String() }

// retention: the settings, the next scheduled pass, this daemon's recent
// passes, and a pass or its dry run on demand.
func (c *Console) retention(w http.ResponseWriter, r *http.Request) {
	p := c.newPage(w, r, "Retention", "retention")
	d := retentionData{}
	p.addErr(c.get(w, r, "/api/v1/archive", nil, &d.Status))
	p.Data = d
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
	var res wire.ArchiveRun
	status := http.StatusOK
	call := c.callOnce
	if d.DryRun {
		call = c.call
	}
	if _, err := call(w, r, http.MethodPost, "/api/v1/archive/run", q, nil, &res); err != nil {
		p.addErr(err)
		status = statusOf(err)
	} else {
		d.Result = &res
	}
	p.addErr(c.get(w, r, "/api/v1/archive", nil, &d.Status))
	p.Data = d
	c.render(w, status, "retention", p)
}
