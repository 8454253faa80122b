package wire

// Resurrection is one resurrection in GET /api/v1/tenants/{tenant}/deletions.
type Resurrection struct {
	ID       string `json:"id"`
	TenantID string `json:"tenant_id"`
	// ErasureJobID and ReceiptSHA256 name the erasure the data came back after.
	ErasureJobID  string `json:"erasure_job_id"`
	ReceiptSHA256 string `json:"receipt_sha256"`
	// Counts is what the latest pass found, per deleter that found any.
	Counts     map[string]int64 `json:"counts"`
	FoundAt    string           `json:"found_at"`
	LastSeenAt string           `json:"last_seen_at"`
	SeenCount  int              `json:"seen_count"`
	// ResolvedAt is when a pass found nothing again; null while open.
	ResolvedAt *string `json:"resolved_at"`
	// Action is REPORTED, HELD or REERASE.
	Action       string  `json:"action"`
	ReeraseJobID *string `json:"reerase_job_id"`
}

// TenantJobs is GET /api/v1/tenants/{tenant}/deletions: a page of the
// tenant's jobs and every resurrection of the tenant, newest first.
type TenantJobs struct {
	JobPage
	Resurrections []Resurrection `json:"resurrections"`
}

// LedgerImport is POST /api/v1/erasures/ledger.
type LedgerImport struct {
	// Entries in the file; Added to the ledger; AlreadyPresent were there
	// (an import is idempotent).
	Entries        int    `json:"entries"`
	Added          int    `json:"added"`
	AlreadyPresent int    `json:"already_present"`
	KeyID          string `json:"key_id"`
}

// Reverify is POST /api/v1/erasures/reverify.
type Reverify struct {
	Requested bool   `json:"requested"`
	Message   string `json:"message"`
}
