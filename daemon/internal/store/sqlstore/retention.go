package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/archive"
)

// RetentionSQL is the SQL of archive.Store in one dialect
// (postgres/retention.go, sqlite/retention.go), beside the archive move and
// the retention lock, which each dialect does its own way.
type RetentionSQL struct {
	// Count counts what a pass would archive and purge: (archive cutoff,
	// purge cutoff, now).
	Count     string
	Purge     string // archived messages: (cutoff, limit)
	PurgeKeys string // expired Idempotency-Keys: (now, limit)
	// PurgeReturns drops recorded returns of messages that are gone (purged
	// from the archive, or deleted), recorded before the cutoff: (cutoff,
	// limit).
	PurgeReturns string
}

// Finished is the status part of the archive predicate, the same in both
// dialects: only messages nothing will change any more are archived.
const Finished = `status IN ('RESOLVED', 'DEAD')`

// CountRetentionCandidates implements archive.Store with the predicates of
// ArchiveDLQBatch, PurgeDLQArchiveBatch and PurgeExpiredIdempotencyKeys.
func (s *Store) CountRetentionCandidates(ctx context.Context, archiveCutoff, purgeCutoff, now time.Time) (archive.RetentionCounts, error) {
	var c archive.RetentionCounts
	if err := s.conn.QueryRow(ctx, s.sql.Retention.Count, archiveCutoff, purgeCutoff, now).Scan(&c.Archive, &c.PurgeArchive,
		&c.PurgeKeys); err != nil {
		return c, fmt.Errorf("count retention candidates: %w", err)
	}
	return c, nil
}

// PurgeDLQArchiveBatch implements archive.Store. The returns recorded for
// messages that are gone go too: a re-read of their positions can no
// longer be told from new dead letters, as with the messages' own
// positions once purged.
func (s *Store) PurgeDLQArchiveBatch(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	n, err := s.conn.Exec(ctx, s.sql.Retention.Purge, cutoff, limit)
	if err != nil {
		return 0, fmt.Errorf("purge archive: %w", err)
	}
	if _, err := s.conn.Exec(ctx, s.sql.Retention.PurgeReturns, cutoff, limit); err != nil {
		return n, fmt.Errorf("purge recorded returns: %w", err)
	}
	return n, nil
}

// PurgeExpiredIdempotencyKeys implements archive.Store.
func (s *Store) PurgeExpiredIdempotencyKeys(ctx context.Context, now time.Time, limit int) (int64, error) {
	n, err := s.conn.Exec(ctx, s.sql.Retention.PurgeKeys, now, limit)
	if err != nil {
		return 0, fmt.Errorf("purge idempotency keys: %w", err)
	}
	return n, nil
}
