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
		g := routeGroup{mux: mux, scope: ScopeNone}
		g.handle("GET /api/v1/archive", func(req *http.Request) (any, error) {
			if err := onlyParams(req.URL.Query()); err != nil {
				return nil, err
			}
			return archiveStatusBody(r.Status()), nil
		})
		g.handle("POST /api/v1/archive/run", func(req *http.Request) (any, error) {
			if err := strictRequest(req, noBody, "dry_run"); err != nil {
				return nil, err
			}
			dryRun, err := parseDryRun(req.URL.Query())
			if err != nil {
				return nil, err
			}
			run := r.RunOnce
			if dryRun {
				run = r.DryRun
			}
			res, err := run(req.Context())
			if err != nil {
				return nil, err
			}
			return archiveRunBody(res), nil
		})
	}
}
