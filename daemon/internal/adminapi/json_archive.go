package adminapi

import (
	"github.com/lifecycled/lifecycled/daemon/internal/archive"
)

// ArchiveStatusBody is GET /api/v1/archive.
type ArchiveStatusBody struct {
	Enabled                 bool    `json:"enabled"`
	IntervalSeconds         float64 `json:"interval_seconds"`
	RetentionSeconds        float64 `json:"retention_seconds"`
	ArchiveRetentionSeconds float64 `json:"archive_retention_seconds"`
	// NextRunAt is when the next scheduled pass is due; null while one
	// runs, or when retention is off.
	NextRunAt *string `json:"next_run_at"`
	// Passes are this daemon's passes since it started, newest first (at
	// most 20): scheduled ones and those asked for with POST .../run.
	Passes []ArchivePassJSON `json:"passes"`
}

// ArchivePassJSON is one pass of GET /api/v1/archive.
type ArchivePassJSON struct {
	StartedAt string `json:"started_at"`
	Trigger   string `json:"trigger"`
	ArchiveRunBody
	Error string `json:"error,omitempty"`
}

func archiveStatusBody(st archive.Status) ArchiveStatusBody {
	b := ArchiveStatusBody{Enabled: st.Enabled, IntervalSeconds: st.Config.Interval.Seconds(), RetentionSeconds: st.Config.Retention.Seconds(),
		ArchiveRetentionSeconds: st.Config.ArchiveRetention.Seconds(), Passes: make([]ArchivePassJSON, 0, len(st.Passes))}
	if st.Enabled && !st.NextRun.IsZero() {
		s := st.NextRun.UTC().Format(TimeFormat)
		b.NextRunAt = &s
	}
	for _, p := range st.Passes {
		b.Passes = append(b.Passes, ArchivePassJSON{StartedAt: p.StartedAt.UTC().Format(TimeFormat), Trigger: p.Trigger,
			ArchiveRunBody: archiveRunBody(p.Result), Error: p.Err})
	}
	return b
}
