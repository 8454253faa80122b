package console

import (
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/wire"
)

// readiness is GET /readyz?verbose as the console reads it.
type readiness struct {
	Status string `json:"status"`
	Checks []struct {
		Name   string `json:"name"`
		Status string `json:"status"`
		Error  string `json:"error"`
		Took   string `json:"took"`
	} `json:"checks"`
}

// topicsBody is GET /api/v1/dlq.
type topicsBody struct {
	Topics []wire.Topic `json:"topics"`
}

type overviewData struct {
	Ready    readiness
	Status   wire.Status
	Plugins  []wire.Plugin
	Topics   []wire.Topic
	Statuses []string
	Progress progressData
}

// dlqStatuses are the columns of the depth tables, in the order of the
// status machine.
var dlqStatuses = []string{"PENDING", "RETRYING", "RESOLVED", "DEAD"}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	p := c.newPage(w, r, "Overview", "overview")
	d := overviewData{Statuses: dlqStatuses}
	if rec, err := c.do(w, r, http.MethodGet, "/readyz", url.Values{"verbose": {""}}, nil, nil); err != nil {
		p.addErr(err)
	} else if err := json.Unmarshal(rec.body.Bytes(), &d.Ready); err != nil {
		p.addErr(rec.apiError())
	}
	p.addErr(c.get(w, r, "/api/v1/status", nil, &d.Status))
	var plugins wire.Plugins
	p.addErr(c.get(w, r, "/api/v1/plugins", nil, &plugins))
	d.Plugins = plugins.Plugins
	var topics topicsBody
	p.addErr(c.get(w, r, "/api/v1/dlq", nil, &topics))
	d.Topics = topics.Topics
	d.Progress = c.loadProgress(w, r, p)
	p.Data = d
	c.render(w, http.StatusOK, "overview", p)
}

// operationJSON is a bulk operation as the API answers it.
type operationJSON struct{ wire.Operation }

// Running reports whether the operation may still change.
func (o operationJSON) Running() bool { return o.State == "RUNNING" }

// ETA is the time left, rounded, or "".
func (o operationJSON) ETA() string {
	if o.ETASeconds == nil {
		return ""
	}
	return (time.Duration(*o.ETASeconds) * time.Second).String()
}

type operationsBody struct {
	Operations []operationJSON `json:"operations"`
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
	var jobs wire.JobPage
	p.addErr(c.get(w, r, "/api/v1/deletions", url.Values{"status": {"SCHEDULED,PENDING,RUNNING,PARTIAL,BLOCKED,AWAITING_APPROVAL"}}, &jobs))
	d.Jobs = jobs.Jobs
	var ops operationsBody
	p.addErr(c.get(w, r, "/api/v1/dlq/operations", url.Values{"state": {"RUNNING"}}, &ops))
	d.Operations = ops.Operations
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
