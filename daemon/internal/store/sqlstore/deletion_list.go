package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
)

// ListDeletionJobs implements deletion.JobStore: one statement for the
// page of jobs and one for all their deleters.
func (s *Store) ListDeletionJobs(ctx context.Context, f deletion.JobFilter) ([]*deletion.Job, error) {
	statuses := make([]string, 0, len(f.Statuses))
	for _, st := range f.Statuses {
		statuses = append(statuses, string(st))
	}
	var (
		afterAt *time.Time
		afterID = uuid.Nil
	)
	if f.After != nil {
		afterAt, afterID = &f.After.At, f.After.ID
	}
	var jobs []*deletion.Job
	err := s.conn.Snapshot(ctx, func(q Querier) error {
		var err error
		jobs, err = QueryAll(ctx, q, scanJob, s.sql.Jobs.List, f.Tenant, jsonArray(statuses), f.CreatedAfter, f.CreatedBefore,
			afterAt, afterID, f.Limit)
		if err != nil || len(jobs) == 0 {
			return err
		}
		ids := make([]string, len(jobs))
		byID := make(map[uuid.UUID]*deletion.Job, len(jobs))
		for i, j := range jobs {
			ids[i] = j.ID.String()
			byID[j.ID] = j
		}
		type owned struct {
			job uuid.UUID
			d   deletion.DeleterState
		}
		ds, err := QueryAll(ctx, q, func(r Scanner) (owned, error) {
			var o owned
			var (
				status                  string
				breakdown, verification []byte
			)
			if err := r.Scan(&o.job, &o.d.Name, &status, &o.d.DeletedCount, &o.d.Total, &o.d.Attempts, &o.d.Error,
				&o.d.UpdatedAt, &breakdown, &verification); err != nil {
				return o, err
			}
			o.d.Status = deletion.DeleterStatus(status)
			return o, decodeDeleterDetail(&o.d, breakdown, verification)
		}, s.sql.Jobs.DeletersOf, jsonArray(ids))
		if err != nil {
			return fmt.Errorf("read deleters: %w", err)
		}
		for _, o := range ds {
			if j := byID[o.job]; j != nil {
				j.Deleters = append(j.Deleters, o.d)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list deletion jobs: %w", err)
	}
	return jobs, nil
}

// jsonArray is a list of strings as a JSON array, the one argument form a
// list takes in both dialects.
func jsonArray(items []string) string {
	if items == nil {
		items = []string{}
	}
	b, err := json.Marshal(items)
	if err != nil {
		// Strings always encode; this cannot happen.
		panic(fmt.Sprintf("encode list: %v", err))
	}
	return string(b)
}
