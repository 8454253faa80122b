package store

import "context"

// scanner reads one row.
type scanner interface{ Scan(dest ...any) error }

// rows is a result being read row by row.
type rows interface {
	scanner
	Next() bool
	Err() error
	Close()
}

// querier runs statements. Each dialect has one adapter (pgConn, liteConn)
// and it is the only code that talks to the driver: it passes Go values
// (time.Time, uuid.UUID) the way the dialect stores them, reads them back,
// and translates the driver's errors into derrors sentinels (pgError,
// sqliteError). What is above it is written once for both dialects.
type querier interface {
	// exec runs a statement and returns how many rows it changed.
	exec(ctx context.Context, sql string, args ...any) (int64, error)
	query(ctx context.Context, sql string, args ...any) (rows, error)
	// queryRow runs a statement that returns one row; Scan returns
	// derrors.ErrNotFound when it returned none.
	queryRow(ctx context.Context, sql string, args ...any) scanner
}

// conn is a querier on the whole database that can also open transactions.
type conn interface {
	querier
	// tx runs fn in a read-write transaction, committed when fn returns nil.
	tx(ctx context.Context, fn func(q querier) error) error
	// snapshot runs fn in a transaction that reads one consistent state.
	snapshot(ctx context.Context, fn func(q querier) error) error
	// snapshotTx runs fn in a read-write transaction whose statements all
	// read the state its first one read, committed when fn returns nil:
	// for a write decided by several reads. It must write nothing another
	// transaction may change meanwhile (PostgreSQL would refuse it).
	snapshotTx(ctx context.Context, fn func(q querier) error) error
}

// sqlStore is the Go both dialects share: each runs it on its own conn with
// its own statements, declared in its postgres_*.go or sqlite_*.go file per
// consumer interface. Postgres and SQLite embed it and add what their SQL
// cannot share (intake, outcomes, the archive move, the retention lock).
type sqlStore struct {
	db  conn
	sql statements
	// searchBatchBytes and searchCandidates, when set (tests), replace
	// searchIndexBatchBytes and candidateLimit.
	searchBatchBytes int64
	searchCandidates int
	// afterCandidates, when set (tests), runs between the read of a bulk
	// operation's text candidates and the read of its set.
	afterCandidates func()
}

// statements is the SQL of one dialect. Every statement of a pair takes
// the same arguments in the same order, so the Go that runs it is shared.
type statements struct {
	dlq       dlqSQL
	jobs      jobSQL
	holds     holdSQL
	receipts  receiptSQL
	keys      keySQL
	retention retentionSQL
	plans     planSQL
	ledger    ledgerSQL
	history   historySQL
	ops       opSQL
	search    *searchDialect
	groups    groupsSQL
}

// queryAll runs a statement and reads every row it returns with scan.
func queryAll[T any](ctx context.Context, q querier, scan func(scanner) (T, error), sql string, args ...any) ([]T, error) {
	r, err := q.query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []T
	for r.Next() {
		v, err := scan(r)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, r.Err()
}
