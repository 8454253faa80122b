package adminapi

import (
	"context"
	"net/http"

	"github.com/lifecycled/lifecycled/daemon/internal/archive"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

// Retention is what the archive routes need.
type Retention interface {
	RunOnce(ctx context.Context) (archive.Result, error)
	DryRun(ctx context.Context) (archive.Result, error)
	Status() archive.Status
}

func archiveRunBody(r archive.Result) wire.ArchiveRun {
	return wire.ArchiveRun{Archived: r.Archived, PurgedArchive: r.PurgedDLQ, PurgedKeys: r.PurgedKeys, Batches: r.Batches,
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
