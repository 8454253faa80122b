package store

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

// ledgerSQL is the SQL of the erasure ledger and re-verification in one
// dialect (postgres_ledger.go, sqlite_ledger.go).
type ledgerSQL struct {
	record             string // (job id, erased at, receipt hash): the job's ledger entry
	entries            string
	importEntry        string // (job id, tenant, erased at, receipt hash, now)
	tenants            string // (after tenant, limit)
	acquire            string // (owner, now, lease until, due before, force)
	renew              string // (owner, lease until)
	release            string // (owner, now, completed)
	openResurrection   string // (tenant)
	insertResurrection string // (id, tenant, erasure job, receipt hash, counts JSON, now, action, reerase job)
	updateResurrection string // (id, counts JSON, now, action, reerase job or NULL)
	resolve            string // (tenant, now)
	list               string // (tenant)
	reerasureOf        string // (job id)
}

var (
	_ ledger.Store             = (*sqlStore)(nil)
	_ deletion.ReerasureSource = (*sqlStore)(nil)
)

// recordErasure writes the ledger entry of a job that an attempt just
// COMPLETED with verification, in that attempt's transaction: a verified
// erasure is never without its entry.
func (s *sqlStore) recordErasure(ctx context.Context, q querier, id uuid.UUID, u deletion.JobUpdate) error {
	var hash string
	if u.Receipt != nil {
		hash = ledger.ReceiptHash(u.Receipt.Body)
	}
	if _, err := q.exec(ctx, s.sql.ledger.record, id, u.Now, hash); err != nil {
		return fmt.Errorf("record the erasure in the ledger: %w", err)
	}
	return nil
}

func scanEntry(row scanner) (ledger.Entry, error) {
	var e ledger.Entry
	err := row.Scan(&e.JobID, &e.TenantID, &e.ErasedAt, &e.ReceiptSHA256, &e.Source, &e.RecordedAt)
	return e, err
}

// LedgerEntries implements ledger.Store.
func (s *sqlStore) LedgerEntries(ctx context.Context) ([]ledger.Entry, error) {
	out, err := queryAll(ctx, s.db, scanEntry, s.sql.ledger.entries)
	if err != nil {
		return nil, fmt.Errorf("read the erasure ledger: %w", err)
	}
	return out, nil
}

// ImportLedger implements ledger.Store.
func (s *sqlStore) ImportLedger(ctx context.Context, entries []ledger.Entry, now time.Time) (int, error) {
	added := 0
	err := s.db.tx(ctx, func(q querier) error {
		added = 0 // a transaction may run again
		for _, e := range entries {
			n, err := q.exec(ctx, s.sql.ledger.importEntry, e.JobID, e.TenantID, e.ErasedAt, e.ReceiptSHA256, now)
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
func (s *sqlStore) LedgerTenants(ctx context.Context, after string, limit int) ([]ledger.Latest, error) {
	out, err := queryAll(ctx, s.db, func(r scanner) (ledger.Latest, error) {
		var l ledger.Latest
		return l, r.Scan(&l.TenantID, &l.JobID, &l.ReceiptSHA256, &l.Busy)
	}, s.sql.ledger.tenants, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read ledger tenants: %w", err)
	}
	return out, nil
}

// AcquireReverifyLease implements ledger.Store.
func (s *sqlStore) AcquireReverifyLease(ctx context.Context, owner string, now, leaseUntil, dueBefore time.Time, force bool) (bool, error) {
	n, err := s.db.exec(ctx, s.sql.ledger.acquire, owner, now, leaseUntil, dueBefore, force)
	if err != nil {
		return false, fmt.Errorf("take the re-verification lease: %w", err)
	}
	return n == 1, nil
}

// RenewReverifyLease implements ledger.Store.
func (s *sqlStore) RenewReverifyLease(ctx context.Context, owner string, leaseUntil time.Time) error {
	n, err := s.db.exec(ctx, s.sql.ledger.renew, owner, leaseUntil)
	if err != nil {
		return fmt.Errorf("renew the re-verification lease: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("%w: another daemon took the re-verification lease", derrors.ErrLeaseLost)
	}
	return nil
}

// ReleaseReverifyLease implements ledger.Store.
func (s *sqlStore) ReleaseReverifyLease(ctx context.Context, owner string, now time.Time, completed bool) error {
	if _, err := s.db.exec(ctx, s.sql.ledger.release, owner, now, completed); err != nil {
		return fmt.Errorf("release the re-verification lease: %w", err)
	}
	return nil
}

func scanResurrection(row scanner) (*ledger.Resurrection, error) {
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
func (s *sqlStore) RecordResurrection(ctx context.Context, f ledger.Found) (ledger.Recorded, error) {
	var out ledger.Recorded
	counts, err := json.Marshal(f.Counts)
	if err != nil {
		return out, err
	}
	tenant := f.Latest.TenantID
	err = s.db.tx(ctx, func(q querier) error {
		out = ledger.Recorded{}
		open, err := scanResurrection(q.queryRow(ctx, s.sql.ledger.openResurrection, tenant))
		if err != nil && !errors.Is(err, derrors.ErrNotFound) {
			return err
		}
		action := ledger.ActionReported
		var jobID *uuid.UUID
		_, err = scanHold(q.queryRow(ctx, s.sql.holds.active, tenant))
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
			n, err := q.exec(ctx, s.sql.jobs.create, id, tenant, string(deletion.JobPending), f.At, f.At, nil, nil)
			if err != nil {
				return fmt.Errorf("create re-erase job: %w", err)
			}
			if n == 1 {
				for _, d := range f.Deleters {
					if _, err := q.exec(ctx, s.sql.jobs.addDeleter, id, d, f.At); err != nil {
						return fmt.Errorf("create re-erase job: %w", err)
					}
				}
				if f.RequireApproval {
					// No plan yet: the approver approves the one current then.
					if _, err := q.exec(ctx, s.sql.plans.onCreate, id, "", true); err != nil {
						return fmt.Errorf("create re-erase job: %w", err)
					}
				}
				jobID, out.JobCreated = &id, true
			} else {
				// A job was requested since the pass read the tenant: it
				// erases the data; link that one.
				job, err := scanJob(q.queryRow(ctx, s.sql.jobs.active, tenant))
				if err != nil {
					return err
				}
				jobID = &job.ID
			}
		}
		if open == nil {
			rid := newID()
			if _, err := q.exec(ctx, s.sql.ledger.insertResurrection, rid, tenant, f.Latest.JobID, f.Latest.ReceiptSHA256,
				string(counts), f.At, string(action), jobID); err != nil {
				return err
			}
			out.New = true
		} else if _, err := q.exec(ctx, s.sql.ledger.updateResurrection, open.ID, string(counts), f.At, string(action), jobID); err != nil {
			return err
		}
		out.Resurrection, err = scanResurrection(q.queryRow(ctx, s.sql.ledger.openResurrection, tenant))
		return err
	})
	if err != nil {
		return ledger.Recorded{}, fmt.Errorf("record resurrection of tenant %q: %w", tenant, err)
	}
	return out, nil
}

// ResolveResurrection implements ledger.Store.
func (s *sqlStore) ResolveResurrection(ctx context.Context, tenant string, now time.Time) (bool, error) {
	n, err := s.db.exec(ctx, s.sql.ledger.resolve, tenant, now)
	if err != nil {
		return false, fmt.Errorf("resolve resurrection of tenant %q: %w", tenant, err)
	}
	return n > 0, nil
}

// Resurrections implements ledger.Store.
func (s *sqlStore) Resurrections(ctx context.Context, tenant string) ([]*ledger.Resurrection, error) {
	out, err := queryAll(ctx, s.db, scanResurrection, s.sql.ledger.list, tenant)
	if err != nil {
		return nil, fmt.Errorf("resurrections of tenant %q: %w", tenant, err)
	}
	return out, nil
}

// ReerasureOf implements deletion.ReerasureSource.
func (s *sqlStore) ReerasureOf(ctx context.Context, jobID uuid.UUID) (*deletion.ReerasureRef, error) {
	var ref deletion.ReerasureRef
	err := s.db.queryRow(ctx, s.sql.ledger.reerasureOf, jobID).Scan(&ref.JobID, &ref.ReceiptSHA256)
	if errors.Is(err, derrors.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("which erasure job %s repeats: %w", jobID, err)
	}
	return &ref, nil
}
