package sqlstore

import "context"

// Scanner reads one row.
type Scanner interface{ Scan(dest ...any) error }

// Rows is a result being read row by row.
type Rows interface {
	Scanner
	Next() bool
	Err() error
	Close()
}

// Querier runs statements. Each driver has one adapter (pgConn, sqliteConn)
// and it is the only code that talks to the driver: it passes Go values
// (time.Time, uuid.UUID) the way the dialect stores them, reads them back,
// and translates the driver's errors into derrors sentinels (pgError,
// sqliteError). What is above it is written once for both dialects.
type Querier interface {
	// Exec runs a statement and returns how many rows it changed.
	Exec(ctx context.Context, sql string, args ...any) (int64, error)
	Query(ctx context.Context, sql string, args ...any) (Rows, error)
	// QueryRow runs a statement that returns one row; Scan returns
	// derrors.ErrNotFound when it returned none.
	QueryRow(ctx context.Context, sql string, args ...any) Scanner
}

// Conn is a Querier on the whole database that can also open transactions.
type Conn interface {
	Querier
	// Tx runs fn in a read-write transaction, committed when fn returns nil.
	Tx(ctx context.Context, fn func(q Querier) error) error
	// Snapshot runs fn in a transaction that reads one consistent state.
	Snapshot(ctx context.Context, fn func(q Querier) error) error
	// SnapshotTx runs fn in a read-write transaction whose statements all
	// read the state its first one read, committed when fn returns nil:
	// for a write decided by several reads. It must write nothing another
	// transaction may change meanwhile (PostgreSQL would refuse it).
	SnapshotTx(ctx context.Context, fn func(q Querier) error) error
}

// Statements is the SQL of one dialect, a struct per consumer interface,
// each field a statement whose comment lists its parameters: every
// dialect's statement of a field takes the same parameters in the same
// order, so the Go that runs it (this package) is written once.
type Statements struct {
	DLQ       DLQSQL
	Jobs      JobSQL
	Holds     HoldSQL
	Receipts  ReceiptSQL
	Keys      KeySQL
	Retention RetentionSQL
	Plans     PlanSQL
	Ledger    LedgerSQL
	History   HistorySQL
	Ops       OpSQL
	Search    *SearchDialect
	Groups    GroupsSQL
}

// QueryAll runs a statement and reads every row it returns with scan.
func QueryAll[T any](ctx context.Context, q Querier, scan func(Scanner) (T, error), sql string, args ...any) ([]T, error) {
	r, err := q.Query(ctx, sql, args...)
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
