package console

import (
	"net/http"
	"net/url"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/enum"
)

// The bulk operations page (/ui/dlq/operations): every operation, newest
// first, filtered by state, each with its progress, outcomes, who started
// it and, while it runs, a cancel button. A finished operation stays
// findable here (it was reachable only from the page that started it).

type operationsData struct {
	CSRF       formTokens
	CanMutate  bool
	State      string
	States     []string
	Operations []operationJSON
	// Live: some operation runs, so the table refreshes itself.
	Live bool
}

func (c *Console) operations(w http.ResponseWriter, r *http.Request) {
	p := c.newPage(w, r, "Bulk operations", "dlq")
	p.Data = c.loadOperations(w, r, p)
	c.render(w, http.StatusOK, "operations", p)
}

// operationsTable is the table alone, which the page polls while some
// operation runs.
func (c *Console) operationsTable(w http.ResponseWriter, r *http.Request) {
	p := c.newPage(w, r, "", "dlq")
	p.Data = c.loadOperations(w, r, p)
	c.render(w, http.StatusOK, "frag:operations:optable", p)
}

func (c *Console) loadOperations(w http.ResponseWriter, r *http.Request, p *page) operationsData {
	d := operationsData{CSRF: p.CSRF, CanMutate: p.CanMutate, State: r.URL.Query().Get("state"),
		States: enum.Strings(dlq.OperationStates)}
	valid := d.State == ""
	for _, s := range d.States {
		valid = valid || s == d.State
	}
	if !valid {
		d.State = ""
	}
	q := url.Values{"limit": {"1000"}} // the API's most
	if d.State == string(dlq.OperationRunning) {
		// The API filters running operations itself; other states here.
		q.Set("state", d.State)
	}
	api, ctx := c.client(w, r)
	ops, err := api.Operations(ctx, q)
	p.addErr(err)
	for _, op := range ops.Operations {
		if d.State == "" || op.State == d.State {
			d.Operations = append(d.Operations, operationJSON{op})
			d.Live = d.Live || op.State == string(dlq.OperationRunning)
		}
	}
	return d
}
