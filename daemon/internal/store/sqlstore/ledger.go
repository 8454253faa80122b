package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/ledger"
)

// LedgerSQL is the SQL of the erasure ledger and re-verification in one
// dialect (postgres/ledger.go, sqlite/ledger.go).
type LedgerSQL struct {
	Record             string // (job id, erased at, receipt hash): the job's ledger entry
	Entries            string
	ImportEntry        string // (job id, tenant, erased at, receipt hash, now)
	Tenants            string // (after tenant, limit)
	Acquire            string // (owner, now, lease until, due before, force)
	Renew              string // (owner, lease until)
	Release            string // (owner, now, completed)
	OpenResurrection   string // (tenant)
	InsertResurrection string // (id, tenant, erasure job, receipt hash, counts JSON, now, action, reerase job)
	UpdateResurrection string // (id, counts JSON, now, action, reerase job or NULL)
	Resolve            string // (tenant, now)
	List               string // (tenant)
	ReerasureOf        string // (job id)
}

var (
	_ ledger.Store             = (*Store)(nil)
	_ deletion.ReerasureSource = (*Store)(nil)
)

// recordErasure writes the ledger entry of a job that an attempt just
// COMPLETED with verification, in that attempt's transaction: a verified
// erasure is never without its entry.
func (s *Store) recordErasure(ctx context.Context, q Querier, id uuid.UUID, u deletion.JobUpdate) error {
	var hash string
	if u.Receipt != nil {
		hash = ledger.ReceiptHash(u.Receipt.Body)
	}
	if _, err := q.Exec(ctx, s.sql.Ledger.Record, id, u.Now, hash); err != nil {
		return fmt.Errorf("record the erasure in the ledger: %w", err)
	}
	return nil
}

func scanEntry(row Scanner) (ledger.Entry, error) {
	var e ledger.Entry
	err := row.Scan(&e.JobID, &e.TenantID, &e.ErasedAt, &e.ReceiptSHA256, &e.Source, &e.RecordedAt)
	return e, err
}

// LedgerEntries implements ledger.Store.
func (s *Store) LedgerEntries(ctx context.Context) ([]ledger.Entry, error) {
	out, err := QueryAll(ctx, s.conn, scanEntry, s.sql.Ledger.Entries)
	if err != nil {
		return nil, fmt.Errorf("read the erasure ledger: %w", err)
	}
	return out, nil
}

// ImportLedger implements ledger.Store.
func (s *Store) ImportLedger(ctx context.Context, entries []ledger.Entry, now time.Time) (int, error) {
	added := 0
	err := s.conn.Tx(ctx, func(q Querier) error {
		added = 0 // a transaction may run again
		for _, e := range entries {
			n, err := q.Exec(ctx, s.sql.Ledger.ImportEntry, e.JobID, e.TenantID, e.ErasedAt, e.ReceiptSHA256, now)
			if err != nil {
				return err
			}
			added += int(n)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("import the erasure ledger: %w", err)
	}
	return added, nil
}

// LedgerTenants implements ledger.Store.
func (s *Store) LedgerTenants(ctx context.Context, after string, limit int) ([]ledger.Latest, error) {
	out, err := QueryAll(ctx, s.conn, func(r Scanner) (ledger.Latest, error) {
		var l ledger.Latest
		return l, r.Scan(&l.TenantID, &l.JobID, &l.ReceiptSHA256, &l.Busy)
	}, s.sql.Ledger.Tenants, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read ledger tenants: %w", err)
	}
	return out, nil
}

// AcquireReverifyLease implements ledger.Store.
func (s *Store) AcquireReverifyLease(ctx context.Context, owner string, now, leaseUntil, dueBefore time.Time, force bool) (bool, error) {
	n, err := s.conn.Exec(ctx, s.sql.Ledger.Acquire, owner, now, leaseUntil, dueBefore, force)
	if err != nil {
		return false, fmt.Errorf("take the re-verification lease: %w", err)
	}
	return n == 1, nil
}

// RenewReverifyLease implements ledger.Store.
func (s *Store) RenewReverifyLease(ctx context.Context, owner string, leaseUntil time.Time) error {
	n, err := s.conn.Exec(ctx, s.sql.Ledger.Renew, owner, leaseUntil)
	if err != nil {
		return fmt.Errorf("renew the re-verification lease: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("%w: another daemon took the re-verification lease", derrors.ErrLeaseLost)
	}
	return nil
}

// ReleaseReverifyLease implements ledger.Store.
func (s *Store) ReleaseReverifyLease(ctx context.Context, owner string, now time.Time, completed bool) error {
	if _, err := s.conn.Exec(ctx, s.sql.Ledger.Release, owner, now, completed); err != nil {
		return fmt.Errorf("release the re-verification lease: %w", err)
	}
	return nil
}

func scanResurrection(row Scanner) (*ledger.Resurrection, error) {
	var (
		r       ledger.Resurrection
		counts  string
		action  string
		reerase string
	)
	if err := row.Scan(&r.ID, &r.TenantID, &r.ErasureJobID, &r.ReceiptSHA256, &counts, &r.FoundAt, &r.LastSeenAt,
		&r.SeenCount, &r.ResolvedAt, &action, &reerase); err != nil {
		return nil, err
	}
	r.Action = ledger.Action(action)
	if err := json.Unmarshal([]byte(counts), &r.Counts); err != nil {
		return nil, fmt.Errorf("resurrection %s: counts: %w", r.ID, err)
	}
	if reerase != "" {
		id, err := uuid.Parse(reerase)
		if err != nil {
			return nil, fmt.Errorf("resurrection %s: reerase_job_id: %w", r.ID, err)
		}
		r.ReeraseJobID = &id
	}
	return &r, nil
}

// RecordResurrection implements ledger.Store.
func (s *Store) RecordResurrection(ctx context.Context, f ledger.Found) (ledger.Recorded, error) {
	var out ledger.Recorded
	counts, err := json.Marshal(f.Counts)
	if err != nil {
		return out, err
	}
	tenant := f.Latest.TenantID
	err = s.conn.Tx(ctx, func(q Querier) error {
		out = ledger.Recorded{}
		open, err := scanResurrection(q.QueryRow(ctx, s.sql.Ledger.OpenResurrection, tenant))
		if err != nil && !errors.Is(err, derrors.ErrNotFound) {
			return err
		}
		action := ledger.ActionReported
		var jobID *uuid.UUID
		_, err = scanHold(q.QueryRow(ctx, s.sql.Holds.Active, tenant))
		held := err == nil
		if err != nil && !errors.Is(err, derrors.ErrNotFound) {
			return fmt.Errorf("read hold of tenant %q: %w", tenant, err)
		}
		switch {
		case held:
			// A legal hold forbids erasing: the resurrection is reported only.
			action = ledger.ActionHeld
		case f.Reerase:
			action = ledger.ActionReerase
			id := newID()
			n, err := q.Exec(ctx, s.sql.Jobs.Create, id, tenant, string(deletion.JobPending), f.At, f.At, nil, nil)
			if err != nil {
				return fmt.Errorf("create re-erase job: %w", err)
			}
			if n == 1 {
				for _, d := range f.Deleters {
					if _, err := q.Exec(ctx, s.sql.Jobs.AddDeleter, id, d, f.At); err != nil {
						return fmt.Errorf("create re-erase job: %w", err)
					}
				}
				if f.RequireApproval {
					// No plan yet: the approver approves the one current then.
					if _, err := q.Exec(ctx, s.sql.Plans.OnCreate, id, "", true); err != nil {
						return fmt.Errorf("create re-erase job: %w", err)
					}
				}
				jobID, out.JobCreated = &id, true
			} else {
				// A job was requested since the pass read the tenant: it
				// erases the data; link that one.
				job, err := scanJob(q.QueryRow(ctx, s.sql.Jobs.Active, tenant))
				if err != nil {
					return err
				}
				jobID = &job.ID
			}
		}
		if open == nil {
			rid := newID()
			if _, err := q.Exec(ctx, s.sql.Ledger.InsertResurrection, rid, tenant, f.Latest.JobID, f.Latest.ReceiptSHA256,
				string(counts), f.At, string(action), jobID); err != nil {
				return err
			}
			out.New = true
		} else if _, err := q.Exec(ctx, s.sql.Ledger.UpdateResurrection, open.ID, string(counts), f.At, string(action), jobID); err != nil {
			return err
		}
		out.Resurrection, err = scanResurrection(q.QueryRow(ctx, s.sql.Ledger.OpenResurrection, tenant))
		return err
	})
	if err != nil {
		return ledger.Recorded{}, fmt.Errorf("record resurrection of tenant %q: %w", tenant, err)
	}
	return out, nil
}

// ResolveResurrection implements ledger.Store.
func (s *Store) ResolveResurrection(ctx context.Context, tenant string, now time.Time) (bool, error) {
	n, err := s.conn.Exec(ctx, s.sql.Ledger.Resolve, tenant, now)
	if err != nil {
		return false, fmt.Errorf("resolve resurrection of tenant %q: %w", tenant, err)
	}
	return n > 0, nil
}

// Resurrections implements ledger.Store.
func (s *Store) Resurrections(ctx context.Context, tenant string) ([]*ledger.Resurrection, error) {
	out, err := QueryAll(ctx, s.conn, scanResurrection, s.sql.Ledger.List, tenant)
	if err != nil {
		return nil, fmt.Errorf("resurrections of tenant %q: %w", tenant, err)
	}
	return out, nil
}

// ReerasureOf implements deletion.ReerasureSource.
func (s *Store) ReerasureOf(ctx context.Context, jobID uuid.UUID) (*deletion.ReerasureRef, error) {
	var ref deletion.ReerasureRef
	err := s.conn.QueryRow(ctx, s.sql.Ledger.ReerasureOf, jobID).Scan(&ref.JobID, &ref.ReceiptSHA256)
	if errors.Is(err, derrors.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("which erasure job %s repeats: %w", jobID, err)
	}
	return &ref, nil
}
