// Package ledger keeps the erasure ledger and re-verifies it. Every
// COMPLETED and verified tenant erasure leaves a ledger entry (tenant,
// job, time, receipt hash), written by the state store in the transaction
// that completes the job. The ledger exports to a file signed with the
// daemon's receipt key and imports back, so that it survives a restore of
// the state store itself. In the background the Reverifier counts every
// ledger tenant in every configured deleter: data found again (a backup
// restored over an erasure, a writer that never stopped) is a
// resurrection, which is recorded, counted in a metric and, when enabled,
// erased again by a new job whose receipt names the first one.
package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
)

// Entry is one verified erasure.
type Entry struct {
	TenantID string
	JobID    uuid.UUID
	ErasedAt time.Time
	// ReceiptSHA256 is "sha256:<hex>" of the receipt as issued; "" when
	// none was issued (the log said why).
	ReceiptSHA256 string
	// Source is "local" (a job of this store) or "import" (a ledger file).
	Source     string
	RecordedAt time.Time
}

// Entry sources.
const (
	SourceLocal  = "local"
	SourceImport = "import"
)

// ReceiptHash is the ledger's hash of a receipt: "sha256:" and the hex
// SHA-256 of its bytes as issued (what `sha256sum` prints of the file the
// receipt route serves, without its final newline).
func ReceiptHash(body []byte) string {
	if len(body) == 0 {
		return ""
	}
	sum := sha256.Sum256(body)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Latest is a ledger tenant with its latest erasure, as re-verification
// reads it.
type Latest struct {
	TenantID      string
	JobID         uuid.UUID
	ReceiptSHA256 string
	// Busy: the tenant has an unfinished deletion job (a re-erase, or a
	// new request): it is not counted, that job is already at work.
	Busy bool
}

// Action is what a resurrection led to.
type Action string

// Actions. REPORTED: reerase is off, so it is only reported. HELD: the
// tenant is on legal hold, so it is reported and not erased again. REERASE:
// a new job erases it again.
const (
	ActionReported Action = "REPORTED"
	ActionHeld     Action = "HELD"
	ActionReerase  Action = "REERASE"
)

// Resurrection is a ledger tenant whose data re-verification found again.
type Resurrection struct {
	ID       uuid.UUID
	TenantID string
	// ErasureJobID and ReceiptSHA256 name the erasure the data came back after.
	ErasureJobID  uuid.UUID
	ReceiptSHA256 string
	// Counts is what the last pass counted, per deleter that found any.
	Counts     map[string]int64
	FoundAt    time.Time
	LastSeenAt time.Time
	SeenCount  int
	// ResolvedAt is when a pass counted zero everywhere again; nil while open.
	ResolvedAt   *time.Time
	Action       Action
	ReeraseJobID *uuid.UUID
}

// Found is what one pass found of one tenant.
type Found struct {
	Latest Latest
	Counts map[string]int64
	At     time.Time
	// Reerase asks for a job (reerase = true); Deleters are its deleters.
	Reerase  bool
	Deleters []string
	// RequireApproval (deletion.require_approval): the job awaits an
	// operator's approval of the current plan, like every new job.
	RequireApproval bool
}

// Recorded is what the store did with a Found.
type Recorded struct {
	Resurrection *Resurrection
	// New: no resurrection of the tenant was open (the metric counts it).
	New bool
	// JobCreated: this call created the re-erase job.
	JobCreated bool
}

// Store is what the ledger needs from the state store.
type Store interface {
	// LedgerEntries returns the whole ledger, oldest first (erased_at, job id).
	LedgerEntries(ctx context.Context) ([]Entry, error)
	// ImportLedger adds the entries it does not have (by job id) in one
	// transaction and returns how many it added.
	ImportLedger(ctx context.Context, entries []Entry, now time.Time) (int, error)
	// LedgerTenants returns up to limit ledger tenants after the tenant id
	// after ("" for the first page), in tenant id order, each with its
	// latest erasure.
	LedgerTenants(ctx context.Context, after string, limit int) ([]Latest, error)
	// AcquireReverifyLease takes the pass lease for owner until leaseUntil
	// when no other owner holds a live one and, unless force, the last pass
	// finished at or before dueBefore (one pass per interval across every
	// daemon of the store). false: another daemon runs it or it is not due.
	AcquireReverifyLease(ctx context.Context, owner string, now, leaseUntil, dueBefore time.Time, force bool) (bool, error)
	// RenewReverifyLease extends owner's lease; derrors.ErrLeaseLost if it lost it.
	RenewReverifyLease(ctx context.Context, owner string, leaseUntil time.Time) error
	// ReleaseReverifyLease ends owner's lease; completed records the pass
	// as finished at now (the next one is due an interval later).
	ReleaseReverifyLease(ctx context.Context, owner string, now time.Time, completed bool) error
	// RecordResurrection records what a pass found of a tenant in one
	// transaction: it opens a resurrection (or updates the tenant's open
	// one) and, when f.Reerase and the tenant is not on hold, creates a
	// deletion job for it, linked to the resurrection.
	RecordResurrection(ctx context.Context, f Found) (Recorded, error)
	// ResolveResurrection closes the tenant's open resurrection, if any,
	// after a pass counted zero everywhere; it reports whether one was open.
	ResolveResurrection(ctx context.Context, tenant string, now time.Time) (bool, error)
	// Resurrections lists the tenant's resurrections, newest first.
	Resurrections(ctx context.Context, tenant string) ([]*Resurrection, error)
}

// ErrInvalidFile: a ledger file that does not verify (tampered, cut
// short, not a ledger, signed by another key). It is also ErrInvalid.
var ErrInvalidFile = errors.New("ledger file does not verify")

// ErrKeyUnknown: a ledger file signed by a key this state store does not
// know. It is also ErrInvalid.
var ErrKeyUnknown = errors.New("ledger file signed by an unknown key")

// fileError wraps a refusal so that it matches its sentinel and
// derrors.ErrInvalid (400) both.
type fileError struct {
	kind error
	msg  string
}

func (e *fileError) Error() string { return e.msg }

func (e *fileError) Is(target error) bool { return target == e.kind || target == derrors.ErrInvalid }
