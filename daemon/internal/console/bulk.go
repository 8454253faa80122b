package console

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/enum"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

// Bulk operations (POST /api/v1/dlq/operations): from any search filter or
// failure group, a preview (the API's dry run: how many match, a sample),
// then the operation with a rate, and its page with live progress and
// cancel.

// bulkFilterFields are the search filters a bulk operation takes.
var bulkFilterFields = []string{"topic", "status", "error", "group", "error_group", "key", "header", "q", "since", "until"}

// bulkActions are the API's actions, in the form's order.
var bulkActions = enum.Strings(dlq.OperationActions)

type bulkData struct {
	Filter url.Values // the filter, as the search page's query
	// IDs are messages selected one by one on the search page: the
	// operation takes them instead of a filter.
	IDs     []string
	Action  string
	Rate    string
	Target  string
	Actions []string
	Preview *bulkPreview
}

// FilterQuery is the filter as a query string (for links and hidden
// fields).
func (d bulkData) FilterQuery() string { return d.Filter.Encode() }

type bulkPreview = wire.OperationDryRun

// bothRefused is the error of a bulk form given messages and a filter.
func bothRefused(p *page) *APIError {
	return &APIError{Status: http.StatusBadRequest, Code: "SYS_CONSOLE_VALIDATION_ERROR", RequestID: p.RequestID,
		Message: "give selected messages (id) or a filter, not both: an operation acts on one or the other"}
}

// selectedIDs are the non-empty ids of a selection, each once, in order.
func selectedIDs(vs []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, v := range vs {
		if v = strings.TrimSpace(v); v != "" && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// filterJSON is the filter as the operation's body has it: the search
// filters as JSON fields, status and header as lists.
func filterJSON(f url.Values) map[string]any {
	out := map[string]any{}
	for _, k := range bulkFilterFields {
		vs := f[k]
		if len(vs) == 0 {
			continue
		}
		switch k {
		case "status":
			var st []string
			for _, v := range vs {
				for _, s := range strings.Split(v, ",") {
					if s = strings.TrimSpace(s); s != "" {
						st = append(st, strings.ToUpper(s))
					}
				}
			}
			out[k] = st
		case "header":
			out[k] = vs
		default:
			out[k] = vs[0]
		}
	}
	return out
}

func (c *Console) bulkForm(w http.ResponseWriter, r *http.Request) {
	p := c.newPage(w, r, "Bulk operation", "dlq")
	q := r.URL.Query()
	d := bulkData{Filter: apiQuery(q, bulkFilterFields), IDs: selectedIDs(q["id"]), Action: q.Get("action"), Rate: q.Get("rate"), Actions: bulkActions}
	if len(d.IDs) > 0 && len(d.Filter) > 0 {
		// Both kept, so that the operation is refused by the API too.
		p.addErr(bothRefused(p))
	}
	if d.Action == "" {
		d.Action = "retry"
	}
	p.Data = d
	c.render(w, http.StatusOK, "bulk", p)
}

// bulkSubmit previews (dry run) or starts the operation.
func (c *Console) bulkSubmit(w http.ResponseWriter, r *http.Request) {
	p := c.newPage(w, r, "Bulk operation", "dlq")
	filter, err := url.ParseQuery(r.PostFormValue("filter"))
	if err != nil {
		p.addErr(&APIError{Status: http.StatusBadRequest, Code: "SYS_CONSOLE_VALIDATION_ERROR", Message: "the filter is not a query string: " + err.Error()})
	}
	d := bulkData{Filter: apiQuery(filter, bulkFilterFields), IDs: selectedIDs(r.PostForm["id"]), Action: r.PostFormValue("action"),
		Rate: strings.TrimSpace(r.PostFormValue("rate")), Target: strings.TrimSpace(r.PostFormValue("target_topic")), Actions: bulkActions}
	body := wire.OperationRequest{Action: d.Action, IDs: d.IDs}
	if len(d.IDs) == 0 || len(d.Filter) > 0 {
		// Ids beside a filter are sent both: the API refuses them, and
		// nothing the operator did not choose is acted on.
		filterBody, err := json.Marshal(filterJSON(d.Filter))
		if err != nil {
			p.addErr(err)
		}
		body.Filter = filterBody
	}
	if d.Rate != "" {
		rate, err := strconv.ParseFloat(d.Rate, 64)
		if err != nil || rate < 0 {
			p.addErr(&APIError{Status: http.StatusBadRequest, Code: "SYS_CONSOLE_VALIDATION_ERROR", Message: "rate must be a number of messages per second (empty: as fast as it goes)"})
		}
		body.Rate = &rate
	}
	if d.Target != "" {
		body.TargetTopic = &d.Target
	}
	start := r.PostFormValue("start") == "1"
	if len(p.Errors) == 0 {
		api, ctx := c.client(w, r)
		if !start {
			prev, err := api.PreviewOperation(ctx, body)
			if err != nil {
				p.addErr(err)
			} else {
				d.Preview = &prev
			}
		} else {
			op, err := api.StartOperation(ctx, body, once(r))
			if err != nil {
				p.addErr(err)
			} else {
				http.Redirect(w, r, "/ui/dlq/operations/"+url.PathEscape(op.ID), http.StatusSeeOther)
				return
			}
		}
	}
	p.Data = d
	status := http.StatusOK
	if len(p.Errors) > 0 {
		status = statusOf(p.Errors[0])
	}
	c.render(w, status, "bulk", p)
}

type operationData struct {
	Op operationJSON
	// Err is a failed refresh of the progress fragment.
	Err *APIError
	// The cancel button stays put while the progress above it is swapped
	// (a click must not land on a replaced node); the fragment that says
	// the end removes it out of band.
	CSRF      formTokens
	CanMutate bool
	Fragment  bool
}

func (c *Console) loadOperation(w http.ResponseWriter, r *http.Request, p *page) operationData {
	d := operationData{CSRF: p.CSRF, CanMutate: p.CanMutate}
	api, ctx := c.client(w, r)
	op, err := api.Operation(ctx, r.PathValue("id"))
	d.Op = operationJSON{op}
	if err != nil {
		p.addErr(err)
		d.Err = p.Errors[len(p.Errors)-1]
	}
	return d
}

// operation is a bulk operation's page; its progress polls itself until
// the operation ends.
func (c *Console) operation(w http.ResponseWriter, r *http.Request) {
	p := c.newPage(w, r, "Bulk operation "+r.PathValue("id"), "dlq")
	p.Data = c.loadOperation(w, r, p)
	status := http.StatusOK
	if len(p.Errors) > 0 {
		status = statusOf(p.Errors[0])
	}
	c.render(w, status, "operation", p)
}

func (c *Console) operationProgress(w http.ResponseWriter, r *http.Request) {
	p := c.newPage(w, r, "", "dlq")
	d := c.loadOperation(w, r, p)
	d.Fragment = true
	p.Data = d
	c.render(w, http.StatusOK, "frag:operation:opprogress", p)
}

func (c *Console) operationCancel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	api, ctx := c.client(w, r)
	if _, err := api.CancelOperation(ctx, id, once(r)); err != nil {
		p := c.newPage(w, r, "Bulk operation "+id, "dlq")
		p.addErr(err)
		p.Data = c.loadOperation(w, r, p)
		c.render(w, statusOf(err), "operation", p)
		return
	}
	http.Redirect(w, r, "/ui/dlq/operations/"+url.PathEscape(id)+"?done=cancel", http.StatusSeeOther)
}
