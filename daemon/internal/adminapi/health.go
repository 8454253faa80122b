package adminapi

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/lifecycled/lifecycled/daemon/wire"
)

// handleHealthz is liveness: the process serves requests. It never looks at
// stores or plugins, so a dependency outage never gets the daemon restarted.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, wire.Health{Status: "ok"})
}

// handleReadyz is readiness: the state store and every plugin answer, and
// the daemon is not draining. ?verbose lists each check; a failing check's
// error only when detailed (see commonRoutes).
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request, detailed bool) {
	_, verbose := r.URL.Query()["verbose"]
	if _, probe := r.URL.Query()["probe"]; probe && s.opts.ProbeStores != nil {
		s.opts.ProbeStores(r.Context())
	}
	var checks []Check
	if s.opts.Checks != nil {
		checks = s.opts.Checks()
	}
	results := make([]wire.HealthCheck, len(checks))
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			res := wire.HealthCheck{Name: c.Name, Status: "ok"}
			if err := c.Fn(ctx); err != nil {
				res.Status, res.Error = "failing", err.Error()
				if !detailed {
					res.Error = "failing: the error is on the admin socket (lifecycled status)"
				}
			}
			res.Took = time.Since(start).Round(time.Microsecond).String()
			results[i] = res
		}()
	}
	wg.Wait()
	body := wire.Health{Status: "ok"}
	status := http.StatusOK
	for _, res := range results {
		if res.Status != "ok" {
			body.Status, status = "unavailable", http.StatusServiceUnavailable
		}
	}
	if s.draining.Load() {
		body.Status, status = "draining", http.StatusServiceUnavailable
		results = append(results, wire.HealthCheck{Name: "daemon", Status: "failing", Error: "draining: shutting down"})
	}
	if verbose || status != http.StatusOK {
		body.Checks = results
	}
	writeJSON(w, status, body)
}
