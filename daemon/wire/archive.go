package wire

// ArchiveRun is POST /api/v1/archive/run.
type ArchiveRun struct {
	Archived            int64   `json:"archived"`
	PurgedArchive       int64   `json:"purged_archive"`
	PurgedKeys          int64   `json:"purged_idempotency_keys"`
	Batches             int     `json:"batches"`
	DryRun              bool    `json:"dry_run,omitempty"`
	TookSeconds         float64 `json:"took_seconds"`
	LongestBatchSeconds float64 `json:"longest_batch_seconds"`
}

// ArchiveStatus is GET /api/v1/archive.
type ArchiveStatus struct {
	Enabled                 bool    `json:"enabled"`
	IntervalSeconds         float64 `json:"interval_seconds"`
	RetentionSeconds        float64 `json:"retention_seconds"`
	ArchiveRetentionSeconds float64 `json:"archive_retention_seconds"`
	// NextRunAt is when the next scheduled pass is due; null while one
	// runs, or when retention is off.
	NextRunAt *string `json:"next_run_at"`
	// Passes are this daemon's passes since it started, newest first (at
	// most 20): scheduled ones and those asked for with POST .../run.
	Passes []ArchivePass `json:"passes"`
}

// ArchivePass is one pass of GET /api/v1/archive.
type ArchivePass struct {
	StartedAt string `json:"started_at"`
	Trigger   string `json:"trigger"`
	ArchiveRun
	Error string `json:"error,omitempty"`
}
