package console

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/enum"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

type overviewData struct {
	Ready    wire.Health
	Status   wire.Status
	Plugins  []wire.Plugin
	Topics   []wire.Topic
	Statuses []string
	Progress progressData
	Intake   intakeRate
}

// intakeRate is every topic's arrivals added up: how fast dead letters
// come in now, and whether that is more than before.
type intakeRate struct {
	PerHour  []int64
	LastHour int64
	Day      int64
}

func intakeOf(topics []wire.Topic) intakeRate {
	var r intakeRate
	for _, t := range topics {
		if r.PerHour == nil && len(t.ArrivalsPerHour) > 0 {
			r.PerHour = make([]int64, len(t.ArrivalsPerHour))
		}
		for i, n := range t.ArrivalsPerHour {
			if i < len(r.PerHour) {
				r.PerHour[i] += n
			}
		}
	}
	for _, n := range r.PerHour {
		r.Day += n
	}
	if len(r.PerHour) > 0 {
		r.LastHour = r.PerHour[len(r.PerHour)-1]
	}
	return r
}

// dlqStatuses are the columns of the depth tables, in the order of the
// status machine.
var dlqStatuses = enum.Strings(dlq.Statuses)

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	p := c.newPage(w, r, "Overview", "overview")
	d := overviewData{Statuses: dlqStatuses}
	api, ctx := c.client(w, r)
	// Not ready is an answer (503 with the checks), not an error to show.
	var err error
	if d.Ready, err = api.Readyz(ctx, true); err != nil && d.Ready.Status == "" {
		p.addErr(err)
	}
	d.Status, err = api.Status(ctx)
	p.addErr(err)
	plugins, err := api.Plugins(ctx)
	p.addErr(err)
	d.Plugins = plugins.Plugins
	topics, err := api.Topics(ctx)
	p.addErr(err)
	d.Topics = topics.Topics
	d.Intake = intakeOf(d.Topics)
	d.Progress = c.loadProgress(w, r, p)
	p.Data = d
	c.render(w, http.StatusOK, "overview", p)
}

// operationJSON is a bulk operation as the API answers it.
type operationJSON struct{ wire.Operation }

// Running reports whether the operation may still change.
func (o operationJSON) Running() bool { return o.State == "RUNNING" }

// Cancelling reports whether a cancel was asked of an operation still
// running: it stops once the pages under way are sent and recorded.
func (o operationJSON) Cancelling() bool { return o.Running() && o.CancelRequestedAt != nil }

// ETA is the time left, rounded, or "".
func (o operationJSON) ETA() string {
	if o.ETASeconds == nil {
		return ""
	}
	return (time.Duration(*o.ETASeconds) * time.Second).String()
}

// progressData is what runs now: erasures and bulk operations, the part of
// the overview that refreshes itself.
type progressData struct {
	Jobs       []wire.Job
	Operations []operationJSON
	Live       bool
}

func (c *Console) loadProgress(w http.ResponseWriter, r *http.Request, p *page) progressData {
	var d progressData
	api, ctx := c.client(w, r)
	jobs, err := api.Deletions(ctx, url.Values{"status": {strings.Join(enum.Strings(deletion.Unfinished()), ",")}})
	p.addErr(err)
	d.Jobs = jobs.Jobs
	ops, err := api.Operations(ctx, url.Values{"state": {"RUNNING"}})
	p.addErr(err)
	for _, op := range ops.Operations {
		d.Operations = append(d.Operations, operationJSON{op})
	}
	d.Live = len(d.Jobs) > 0 || len(d.Operations) > 0
	return d
}

// progress is the fragment of the overview that htmx polls while
// something runs.
func (c *Console) progress(w http.ResponseWriter, r *http.Request) {
	p := c.newPage(w, r, "Progress", "overview")
	p.Data = c.loadProgress(w, r, p)
	c.render(w, http.StatusOK, "frag:overview:progress", p)
}
