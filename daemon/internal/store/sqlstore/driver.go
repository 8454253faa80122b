package sqlstore

import (
	"context"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/migrations"
)

// Driver is one database's side of the state store, implemented by its
// package (store/postgres, store/sqlite): the connection, the SQL of the
// Statements Store runs, and the operations whose Go differs between
// databases, each taking a Params struct.
type Driver interface {
	// Dialect names the database.
	Dialect() migrations.Dialect
	// Conn is the adapter on the whole database: the only code that talks
	// to the database's Go driver, which passes Go values as the database
	// stores them and translates its errors into derrors sentinels.
	Conn() Conn
	// Statements is the SQL Store runs on Conn.
	Statements() *Statements

	// IngestDLQ stores a batch of dead letters and applies the returning
	// replays among them, in one transaction (dlq.Store.IngestDLQ).
	IngestDLQ(ctx context.Context, p IngestDLQParams) (dlq.IngestResult, error)
	// WriteOutcomes writes the rows of finished retries in q's
	// transaction.
	WriteOutcomes(ctx context.Context, q Querier, p WriteOutcomesParams) error
	// PrepareClaimTopic runs before a claim of a page of a topic's
	// messages; failures only cost speed.
	PrepareClaimTopic(ctx context.Context, p PrepareClaimTopicParams)
	// RetryDLQPage claims, sends and records a page of a bulk retry
	// (dlq.OperationStore.RetryDLQPage).
	RetryDLQPage(ctx context.Context, p dlq.RetryPage) ([]dlq.Recorded, error)
	// IndexDLQSearch indexes a batch of the search index's queue and
	// returns how many queued messages it took.
	IndexDLQSearch(ctx context.Context, p IndexDLQSearchParams) (int, error)
	// ArchiveDLQBatch moves finished messages into the archive
	// (archive.Store.ArchiveDLQBatch).
	ArchiveDLQBatch(ctx context.Context, p ArchiveDLQBatchParams) (int64, error)
	// TryRetentionLock takes the lock that serialises retention passes
	// (archive.Store.TryRetentionLock).
	TryRetentionLock(ctx context.Context) (func(), bool, error)

	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	// Close releases connections.
	Close() error
}

// IngestDLQParams are the parameters of Driver.IngestDLQ.
type IngestDLQParams struct {
	Batch   []dlq.Incoming
	Options dlq.IngestOptions
}

// WriteOutcomesParams are the parameters of Driver.WriteOutcomes: the
// rows (from Finish) written at Now.
type WriteOutcomesParams struct {
	Now  time.Time
	Rows []OutcomeRow
}

// PrepareClaimTopicParams are the parameters of Driver.PrepareClaimTopic.
type PrepareClaimTopicParams struct {
	// First is whether the claim is a retry-all's first page (no cursor).
	First bool
}

// IndexDLQSearchParams are the parameters of Driver.IndexDLQSearch.
type IndexDLQSearchParams struct {
	// MaxBytes bounds a batch by its payloads and errors: it stops at the
	// message that crosses it, and takes one message at least.
	MaxBytes int64
}

// ArchiveDLQBatchParams are the parameters of Driver.ArchiveDLQBatch: up
// to Limit finished messages last updated before Cutoff.
type ArchiveDLQBatchParams struct {
	Cutoff time.Time
	Limit  int
}
