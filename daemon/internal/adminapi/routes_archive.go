package adminapi

import (
	"context"
	"net/http"

	"github.com/lifecycled/lifecycled/daemon/internal/archive"
)

// Retention is what the archive routes need.
type Retention interface {
	RunOnce(ctx context.Context) (archive.Result, error)
	DryRun(ctx context.Context) (archive.Result, error)
	Status() archive.Status
}

// ArchiveRunBody is POST /api/v1/archive/run.
type ArchiveRunBody struct {
	Archived            int64   `json:"archived"`
	PurgedArchive       int64   `json:"purged_archive"`
	PurgedKeys          int64   `json:"purged_idempotency_keys"`
	Batches             int     `json:"batches"`
	DryRun              bool    `json:"dry_run,omitempty"`
	TookSeconds         float64 `json:"took_seconds"`
	LongestBatchSeconds float64 `json:"longest_batch_seconds"`
}

func archiveRunBody(r archive.Result) ArchiveRunBody {
	return ArchiveRunBody{Archived: r.Archived, PurgedArchive: r.PurgedDLQ, PurgedKeys: r.PurgedKeys, Batches: r.Batches,
		DryRun: r.DryRun, TookSeconds: r.Took.Seconds(), LongestBatchSeconds: r.LongestBatch.Seconds()}
}

// ArchiveRoutes serves POST /api/v1/archive/run: one retention pass now, or
// with ?dry_run=true the counts of what it would move and purge; and GET
// /api/v1/archive: the settings, the next scheduled pass and this daemon's
// recent passes.
func ArchiveRoutes(r Retention) func(*http.ServeMux) {
	return func(mux *http.ServeMux) {
		mux.HandleFunc("GET /api/v1/archive", func(w http.ResponseWriter, req *http.Request) {
			if err := onlyParams(req.URL.Query()); err != nil {
				writeError(w, req, ScopeNone, err)
				return
			}
			writeJSON(w, http.StatusOK, archiveStatusBody(r.Status()))
		})
		mux.HandleFunc("POST /api/v1/archive/run", func(w http.ResponseWriter, req *http.Request) {
			if err := strictRequest(req, noBody, "dry_run"); err != nil {
				writeError(w, req, ScopeNone, err)
				return
			}
			dryRun, err := parseDryRun(req.URL.Query())
			if err != nil {
				writeError(w, req, ScopeNone, err)
				return
			}
			run := r.RunOnce
			if dryRun {
				run = r.DryRun
			}
			res, err := run(req.Context())
			if err != nil {
				writeError(w, req, ScopeNone, err)
				return
			}
			writeJSON(w, http.StatusOK, archiveRunBody(res))
		})
	}
}
