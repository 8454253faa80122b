package adminapi

import (
	"context"
	"net/http"

	"github.com/lifecycled/lifecycled/daemon/internal/archive"
)

// Retention is what the archive route needs.
type Retention interface {
	RunOnce(ctx context.Context) (archive.Result, error)
}

// ArchiveRunBody is POST /api/v1/archive/run.
type ArchiveRunBody struct {
	archive.Result
	TookSeconds         float64 `json:"took_seconds"`
	LongestBatchSeconds float64 `json:"longest_batch_seconds"`
}

// ArchiveRoutes serves POST /api/v1/archive/run: one retention pass now.
func ArchiveRoutes(r Retention) func(*http.ServeMux) {
	return func(mux *http.ServeMux) {
		mux.HandleFunc("POST /api/v1/archive/run", func(w http.ResponseWriter, req *http.Request) {
			res, err := r.RunOnce(req.Context())
			if err != nil {
				writeError(w, req, ScopeNone, err)
				return
			}
			writeJSON(w, http.StatusOK, ArchiveRunBody{Result: res, TookSeconds: res.Took.Seconds(), LongestBatchSeconds: res.LongestBatch.Seconds()})
		})
	}
}
