package adminapi

import (
	"net/http"
)

// route is a handler that returns its answer instead of writing it: the
// body, or an answer (a status other than 200, headers, bytes sent as they
// are), or the error that its group's scope turns into the API's envelope.
// A route cannot forget to return after an error, or answer twice.
type route func(r *http.Request) (any, error)

// routeGroup registers the routes of one family (dead letters, tenants,
// ...) under one error scope.
type routeGroup struct {
	mux   *http.ServeMux
	scope Scope
}

func (g routeGroup) handle(pattern string, h route) {
	g.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		out, err := h(r)
		if err != nil {
			writeError(w, r, g.scope, err)
			return
		}
		a, ok := out.(answer)
		if !ok {
			writeJSON(w, http.StatusOK, out)
			return
		}
		for name, vs := range a.header {
			w.Header()[name] = vs
		}
		status := a.status
		if status == 0 {
			status = http.StatusOK
		}
		if a.raw != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write(a.raw)
			return
		}
		writeJSON(w, status, a.body)
	})
}

// answer is a route's answer when a body alone does not say it all.
type answer struct {
	status int
	header http.Header
	body   any
	// raw is sent byte for byte instead of body (a signed receipt or
	// ledger, whose signature covers those bytes).
	raw []byte
}

// accepted is a 202 answer: the work goes on after it.
func accepted(body any, header ...string) answer {
	a := answer{status: http.StatusAccepted, body: body}
	for i := 0; i+1 < len(header); i += 2 {
		if a.header == nil {
			a.header = http.Header{}
		}
		a.header.Set(header[i], header[i+1])
	}
	return a
}
