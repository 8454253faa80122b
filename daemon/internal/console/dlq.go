package console

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/lifecycled/lifecycled/daemon/wire"
)

// searchFields are the filters of GET /api/v1/dlq/messages that the search
// form has; the console passes the page's query to the API as it is (empty
// fields left out), so a search URL is shareable and every filter of the
// API works, also those typed into the address bar.
var searchFields = []string{"topic", "status", "error", "group", "error_group", "key", "header", "q", "since", "until", "include_archived", "order", "limit", "cursor"}

// apiQuery is the page's query without empty values, for the API (which
// refuses an empty filter rather than ignoring it).
func apiQuery(q url.Values, allowed []string) url.Values {
	out := url.Values{}
	for _, k := range allowed {
		for _, v := range q[k] {
			if v = strings.TrimSpace(v); v != "" {
				out.Add(k, v)
			}
		}
	}
	return out
}

func (c *Console) dlqRoutes(mux *http.ServeMux) {
	mux.Handle("GET /ui/dlq", c.secure(c.dlqIndex))
	mux.Handle("GET /ui/dlq/search", c.secure(c.dlqSearch))
	mux.Handle("POST /ui/dlq/topics/{topic}/{action}", c.mutation(c.topicAction))
	mux.Handle("GET /ui/dlq/messages/{id}", c.secure(c.message))
	mux.Handle("POST /ui/dlq/messages/{id}/replay", c.mutation(c.replay))
	mux.Handle("POST /ui/dlq/messages/{id}/{action}", c.mutation(c.messageAction))
	mux.Handle("GET /ui/dlq/bulk", c.secure(c.bulkForm))
	mux.Handle("POST /ui/dlq/bulk", c.mutation(c.bulkSubmit))
	mux.Handle("GET /ui/dlq/operations", c.secure(c.operations))
	mux.Handle("GET /ui/dlq/operations/table", c.secure(c.operationsTable))
	mux.Handle("GET /ui/dlq/operations/{id}", c.secure(c.operation))
	mux.Handle("GET /ui/dlq/operations/{id}/progress", c.secure(c.operationProgress))
	mux.Handle("POST /ui/dlq/operations/{id}/cancel", c.mutation(c.operationCancel))
}

type dlqIndexData struct {
	Topics   []wire.Topic
	Groups   []wire.Group
	Statuses []string
	Sort     string
	// ByError lists error groups (one error across sources) rather than
	// failure groups.
	ByError bool
}

// dlqIndex: topics with counts and pause/resume, and the failure groups.
func (c *Console) dlqIndex(w http.ResponseWriter, r *http.Request) {
	p := c.newPage(w, r, "Dead letters", "dlq")
	d := dlqIndexData{Statuses: dlqStatuses, Sort: r.URL.Query().Get("sort"), ByError: r.URL.Query().Get("by") == "error"}
	api, ctx := c.client(w, r)
	topics, err := api.Topics(ctx)
	p.addErr(err)
	d.Topics = topics.Topics
	groups, err := api.Groups(ctx, apiQuery(r.URL.Query(), []string{"topic", "status", "sort", "by", "limit"}))
	p.addErr(err)
	d.Groups = groups.Groups
	p.Data = d
	c.render(w, http.StatusOK, "dlq", p)
}

type searchData struct {
	Form     url.Values
	URL      *url.URL
	Statuses []string
	Result   wire.SearchResult
	Searched bool
}

// Has reports whether status s is among the form's.
func (d searchData) Has(s string) bool {
	for _, v := range d.Form["status"] {
		for _, x := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(x), s) {
				return true
			}
		}
	}
	return false
}

// BulkQuery is the filter of this search as the bulk page's query.
func (d searchData) BulkQuery() string {
	q := apiQuery(d.Form, searchFields)
	q.Del("cursor")
	q.Del("limit")
	q.Del("order")
	q.Del("include_archived")
	return q.Encode()
}

func (c *Console) dlqSearch(w http.ResponseWriter, r *http.Request) {
	p := c.newPage(w, r, "Search dead letters", "dlq")
	q := r.URL.Query()
	d := searchData{Form: q, URL: r.URL, Statuses: dlqStatuses}
	aq := apiQuery(q, searchFields)
	if aq.Get("limit") == "" {
		aq.Set("limit", "50")
	}
	api, ctx := c.client(w, r)
	var err error
	if d.Result, err = api.Search(ctx, aq); err != nil {
		p.addErr(err)
	} else {
		d.Searched = true
	}
	p.Data = d
	c.render(w, http.StatusOK, "search", p)
}

// topicAction pauses or resumes the automatic retries of a topic.
func (c *Console) topicAction(w http.ResponseWriter, r *http.Request) {
	topic, action := r.PathValue("topic"), r.PathValue("action")
	api, ctx := c.client(w, r)
	var err error
	switch action {
	case "pause":
		_, err = api.Pause(ctx, topic, strings.TrimSpace(r.PostFormValue("reason")), once(r))
	case "resume":
		_, err = api.Resume(ctx, topic, once(r))
	default:
		c.refuse(w, r, http.StatusNotFound, "SYS_CONSOLE_NOT_FOUND", "no topic action "+action)
		return
	}
	if err != nil {
		p := c.newPage(w, r, "Dead letters", "dlq")
		p.addErr(err)
		c.render(w, statusOf(err), "error", p)
		return
	}
	done := map[string]string{"pause": "paused", "resume": "resumed"}[action]
	http.Redirect(w, r, "/ui/dlq?done="+done, http.StatusSeeOther)
}

// statusOf is the status to answer with for a failed API call: the API's.
func statusOf(err error) int {
	if ae, ok := apiErrorOf(err); ok && ae.Status >= 400 {
		return ae.Status
	}
	return http.StatusInternalServerError
}
