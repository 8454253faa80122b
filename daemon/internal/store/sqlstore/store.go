// Package sqlstore is the state store's Go that every database runs: the
// implementation of store.Store on a Driver, which each database's package
// (store/postgres, store/sqlite) provides. The Go here reaches a database
// in two ways only: statements of the driver's Statements, which take the
// same parameters in the same order on every database, run on the
// driver's Conn; and the Driver's operations, each with a Params struct,
// for what the databases do with different Go (intake, the outcomes'
// write, a bulk retry's page, the search indexer, the archive move, the
// retention lock).
package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/migrations"
)

// Store is the state store on one Driver. A driver's package wraps it in a
// type of its own that adds the driver's handle for tests (Pool, DB).
type Store struct {
	drv Driver
	// conn and sql are the driver's Conn and Statements.
	conn Conn
	sql  Statements
	// SearchBatchBytes and SearchCandidates, when set (tests), replace
	// searchIndexBatchBytes and candidateLimit.
	SearchBatchBytes int64
	SearchCandidates int
	// AfterCandidates, when set (tests), runs between the read of a bulk
	// operation's text candidates and the read of its set.
	AfterCandidates func()
}

// New returns the store on drv.
func New(drv Driver) *Store {
	return &Store{drv: drv, conn: drv.Conn(), sql: *drv.Statements()}
}

// Core returns s: a driver package's store type, which embeds it, hands
// it to tests that set its hooks.
func (s *Store) Core() *Store { return s }

// Dialect implements store.Store.
func (s *Store) Dialect() migrations.Dialect { return s.drv.Dialect() }

// Ping implements store.Store.
func (s *Store) Ping(ctx context.Context) error { return s.drv.Ping(ctx) }

// Close implements store.Store.
func (s *Store) Close() error { return s.drv.Close() }

// IngestDLQ implements dlq.Store.
func (s *Store) IngestDLQ(ctx context.Context, batch []dlq.Incoming, opts dlq.IngestOptions) (dlq.IngestResult, error) {
	return s.drv.IngestDLQ(ctx, IngestDLQParams{Batch: batch, Options: opts})
}

// FinishDLQ implements dlq.Store.
func (s *Store) FinishDLQ(ctx context.Context, owner string, now time.Time, outcomes []dlq.Outcome) ([]dlq.Recorded, error) {
	return s.FinishOutcomes(ctx, owner, now, outcomes, s.WriteOutcomes(ctx, now), nil)
}

// WriteOutcomes is the driver's write of the outcome rows of a FinishDLQ
// or a bulk retry's page at now.
func (s *Store) WriteOutcomes(ctx context.Context, now time.Time) func(q Querier, rows []OutcomeRow) error {
	return func(q Querier, rows []OutcomeRow) error {
		return s.drv.WriteOutcomes(ctx, q, WriteOutcomesParams{Now: now, Rows: rows})
	}
}

// ClaimDLQTopic implements dlq.Store.
func (s *Store) ClaimDLQTopic(ctx context.Context, topic string, after *dlq.Cursor, limit int, c dlq.Claim) ([]dlq.Message, error) {
	entered := time.Now() // the driver's preparation is part of the claim's wait
	s.drv.PrepareClaimTopic(ctx, PrepareClaimTopicParams{First: after == nil})
	return s.ClaimTopic(ctx, topic, after, limit, c, entered)
}

// RetryDLQPage implements dlq.OperationStore.
func (s *Store) RetryDLQPage(ctx context.Context, p dlq.RetryPage) ([]dlq.Recorded, error) {
	return s.drv.RetryDLQPage(ctx, p)
}

// IndexDLQSearch implements searchindex.Store: a batch of the queue,
// and how many messages are left in it.
func (s *Store) IndexDLQSearch(ctx context.Context) (int, int64, error) {
	done, err := s.drv.IndexDLQSearch(ctx, IndexDLQSearchParams{MaxBytes: s.SearchBatch()})
	if err != nil {
		return 0, 0, err
	}
	queued, err := s.UnindexedDLQ(ctx)
	return done, queued, err
}

// ArchiveDLQBatch implements archive.Store. The arrivals counters of the
// hours before cutoff go first: they are kept as long as the messages
// they count stay live at most, and the windows read are a day long.
func (s *Store) ArchiveDLQBatch(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	if _, err := s.conn.Exec(ctx, `DELETE FROM `+s.sql.Search.Arrivals+` WHERE hour < `+s.sql.Search.Placeholder(1), cutoff); err != nil {
		return 0, fmt.Errorf("drop old arrivals counters: %w", err)
	}
	return s.drv.ArchiveDLQBatch(ctx, ArchiveDLQBatchParams{Cutoff: cutoff, Limit: limit})
}

// TryRetentionLock implements archive.Store.
func (s *Store) TryRetentionLock(ctx context.Context) (func(), bool, error) {
	return s.drv.TryRetentionLock(ctx)
}
