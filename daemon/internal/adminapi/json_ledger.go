package adminapi

import (
	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/ledger"
)

// ResurrectionJSON is one resurrection in GET /api/v1/tenants/{tenant}/deletions.
type ResurrectionJSON struct {
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

func resurrectionJSON(r *ledger.Resurrection) ResurrectionJSON {
	out := ResurrectionJSON{ID: r.ID.String(), TenantID: r.TenantID, ErasureJobID: r.ErasureJobID.String(),
		ReceiptSHA256: r.ReceiptSHA256, Counts: r.Counts, FoundAt: deletion.FormatTime(r.FoundAt),
		LastSeenAt: deletion.FormatTime(r.LastSeenAt), SeenCount: r.SeenCount, Action: string(r.Action)}
	if out.Counts == nil {
		out.Counts = map[string]int64{}
	}
	if r.ResolvedAt != nil {
		s := deletion.FormatTime(*r.ResolvedAt)
		out.ResolvedAt = &s
	}
	if r.ReeraseJobID != nil {
		s := r.ReeraseJobID.String()
		out.ReeraseJobID = &s
	}
	return out
}

// TenantJobsBody is GET /api/v1/tenants/{tenant}/deletions: a page of the
// tenant's jobs and every resurrection of the tenant, newest first.
type TenantJobsBody struct {
	JobsBody
	Resurrections []ResurrectionJSON `json:"resurrections"`
}

// LedgerImportBody is POST /api/v1/erasures/ledger.
type LedgerImportBody struct {
	// Entries in the file; Added to the ledger; AlreadyPresent were there
	// (an import is idempotent).
	Entries        int    `json:"entries"`
	Added          int    `json:"added"`
	AlreadyPresent int    `json:"already_present"`
	KeyID          string `json:"key_id"`
}

// ReverifyBody is POST /api/v1/erasures/reverify.
type ReverifyBody struct {
	Requested bool   `json:"requested"`
	Message   string `json:"message"`
}
