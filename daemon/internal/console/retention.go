package console

import (
	"net/http"
	"strconv"
	"time"

	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/lifecycled/lifecycled/daemon/wire"
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
	api, ctx := c.client(w, r)
	var err error
	d.Status, err = api.Archive(ctx)
	p.addErr(err)
	p.Data = d
	c.render(w, http.StatusOK, "retention", p)
}

// retentionRun runs a retention pass now, or its dry run (counts only).
func (c *Console) retentionRun(w http.ResponseWriter, r *http.Request) {
	p := c.newPage(w, r, "Retention", "retention")
	d := retentionData{DryRun: r.PostFormValue("dry_run") == "1"}
	status := http.StatusOK
	key := once(r)
	if d.DryRun {
		key = adminclient.OncePerRoute("")
	}
	api, ctx := c.client(w, r)
	res, err := api.RunArchive(ctx, d.DryRun, key)
	if err != nil {
		p.addErr(err)
		status = statusOf(err)
	} else {
		d.Result = &res
	}
	d.Status, err = api.Archive(ctx)
	p.addErr(err)
	p.Data = d
	c.render(w, status, "retention", p)
}
