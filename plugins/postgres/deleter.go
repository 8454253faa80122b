package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lifecycled/lifecycled/sdk"
)

const version = "1.0.0"

type config struct {
	DSN              string   `json:"dsn"`
	Password         string   `json:"password"`
	TenantColumn     string   `json:"tenant_column"`
	Tables           []string `json:"tables"`
	Discover         bool     `json:"discover"`
	Schemas          []string `json:"schemas"`
	BatchSize        int      `json:"batch_size"`
	LockTimeout      string   `json:"lock_timeout"`
	StatementTimeout string   `json:"statement_timeout"`
}

type deleter struct {
	mu     sync.Mutex
	pool   *pgxpool.Pool
	tables []table // child first
	cfg    config
}

// table is a table to delete from, quoted once.
type table struct {
	name   string // as configured or discovered, for reports
	ident  string // quoted identifier
	column string // quoted tenant column
}

func (d *deleter) Configure(ctx context.Context, req *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	cfg := config{TenantColumn: "tenant_id", BatchSize: 5000, Schemas: []string{"public"}, LockTimeout: "1s", StatementTimeout: "30s"}
	if err := sdk.DecodeConfig(req.Config, &cfg); err != nil {
		return nil, err
	}
	var problems []sdk.FieldError
	if cfg.DSN == "" {
		problems = append(problems, sdk.FieldError{Field: "dsn", Problem: "required, e.g. postgres://app@db/app"})
	}
	if cfg.TenantColumn == "" {
		problems = append(problems, sdk.FieldError{Field: "tenant_column", Problem: "must not be empty"})
	}
	switch {
	case cfg.Discover && len(cfg.Tables) > 0:
		problems = append(problems, sdk.FieldError{Field: "tables", Problem: "set either tables or discover = true, not both"})
	case !cfg.Discover && len(cfg.Tables) == 0:
		problems = append(problems, sdk.FieldError{Field: "tables", Problem: "required (child tables first), or set discover = true"})
	}
	if cfg.BatchSize < 1 || cfg.BatchSize > 1_000_000 {
		problems = append(problems, sdk.FieldError{Field: "batch_size", Problem: "must be between 1 and 1000000"})
	}
	for field, v := range map[string]string{"lock_timeout": cfg.LockTimeout, "statement_timeout": cfg.StatementTimeout} {
		if _, err := time.ParseDuration(v); err != nil {
			problems = append(problems, sdk.FieldError{Field: field, Problem: "must be a duration such as \"1s\""})
		}
	}
	var pcfg *pgxpool.Config
	if cfg.DSN != "" {
		var err error
		if pcfg, err = pgxpool.ParseConfig(cfg.DSN); err != nil {
			problems = append(problems, sdk.FieldError{Field: "dsn", Problem: "not a valid connection string"})
		}
	}
	if len(problems) > 0 {
		return nil, sdk.InvalidConfig(problems...)
	}
	if cfg.Password != "" {
		pcfg.ConnConfig.Password = cfg.Password
	}
	lt, _ := time.ParseDuration(cfg.LockTimeout)
	st, _ := time.ParseDuration(cfg.StatementTimeout)
	// Every batch is its own short transaction; waiting long for a lock
	// would hold up the application, so give up and retry the job later.
	pcfg.ConnConfig.RuntimeParams["lock_timeout"] = fmt.Sprint(lt.Milliseconds())
	pcfg.ConnConfig.RuntimeParams["statement_timeout"] = fmt.Sprint(st.Milliseconds())
	pcfg.ConnConfig.RuntimeParams["application_name"] = "lifecycled-plugin-postgres"
	// A batch's commit does not wait for its WAL flush: a batch lost in a
	// server crash is deleted again on the retry. Delete ends with a
	// synchronous barrier, so nothing is reported deleted before it is
	// durable. Waiting for one flush per batch costs a third of the time.
	pcfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	pcfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, classify(fmt.Errorf("connect: %w", err))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, classify(fmt.Errorf("connect: %w", err))
	}
	var tables []table
	var warnings []string
	if cfg.Discover {
		tables, warnings, err = discover(ctx, pool, cfg.Schemas, cfg.TenantColumn)
	} else {
		tables, warnings, err = checkTables(ctx, pool, cfg.Tables, cfg.TenantColumn)
	}
	if err != nil {
		pool.Close()
		return nil, err
	}
	d.mu.Lock()
	if d.pool != nil {
		d.pool.Close()
	}
	d.pool, d.tables, d.cfg = pool, tables, cfg
	d.mu.Unlock()
	return &sdk.ConfigureResponse{PluginVersion: version, Warnings: warnings}, nil
}

func (d *deleter) current() (*pgxpool.Pool, []table, config, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pool == nil {
		return nil, nil, config{}, sdk.Unavailable(errors.New("not configured"))
	}
	return d.pool, d.tables, d.cfg, nil
}

// classify maps PostgreSQL and network errors to sdk classes: connection
// trouble, timeouts, lock waits, serialization failures and resource limits
// are retryable; bad SQL, permissions, bad input and constraint violations
// are not.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			strings.HasPrefix(pgErr.Code, "53"), // insufficient resources
			strings.HasPrefix(pgErr.Code, "57"), // operator intervention, statement timeout
			pgErr.Code == "40001", pgErr.Code == "40P01", pgErr.Code == "55P03":
			return sdk.Retryable(err, 0)
		case strings.HasPrefix(pgErr.Code, "22"): // data exception: the tenant id does not fit the column
			return &sdk.Error{Class: sdk.ClassPermanent, Code: sdk.CodeInvalidArgument, Message: err.Error()}
		case pgErr.Code == "42P01":
			return &sdk.Error{Class: sdk.ClassPermanent, Code: sdk.CodeNotFound, Message: err.Error()}
		default:
			return sdk.Permanent(err)
		}
	}
	var ne net.Error
	var ce *pgconn.ConnectError
	if errors.As(err, &ne) || errors.As(err, &ce) || pgconn.SafeToRetry(err) || strings.Contains(err.Error(), "connection refused") ||
		strings.Contains(err.Error(), "conn closed") || strings.Contains(err.Error(), "unexpected EOF") {
		return sdk.Retryable(err, 0)
	}
	return sdk.Retryable(err, 0)
}

// Count counts with one count(*) per table.
func (d *deleter) Count(ctx context.Context, req *sdk.CountRequest) (*sdk.CountResponse, error) {
	pool, tables, _, err := d.current()
	if err != nil {
		return nil, err
	}
	resp := &sdk.CountResponse{Breakdown: map[string]int64{}}
	for _, t := range tables {
		var n int64
		q := fmt.Sprintf("SELECT count(*) FROM %s WHERE %s = $1", t.ident, t.column)
		if err := pool.QueryRow(ctx, q, req.TenantID).Scan(&n); err != nil {
			return nil, classify(fmt.Errorf("count %s: %w", t.name, err))
		}
		resp.Breakdown[t.name] = n
		resp.Count += n
	}
	return resp, nil
}

// Delete deletes table by table, child first, in batches of batch_size rows
// chosen through the tenant index; each batch commits on its own so no
// transaction holds row locks for long.
func (d *deleter) Delete(ctx context.Context, req *sdk.DeleteRequest, progress sdk.Progress) (*sdk.DeleteResponse, error) {
	pool, tables, cfg, err := d.current()
	if err != nil {
		return nil, err
	}
	resp := &sdk.DeleteResponse{Breakdown: map[string]int64{}}
	for _, t := range tables {
		q := fmt.Sprintf(`DELETE FROM %[1]s WHERE ctid = ANY(ARRAY(
			SELECT ctid FROM %[1]s WHERE %[2]s = $1 LIMIT $2))`, t.ident, t.column)
		for {
			if err := ctx.Err(); err != nil {
				return nil, sdk.PartialDeletion(resp.DeletedCount, err)
			}
			tag, err := pool.Exec(ctx, q, req.TenantID, cfg.BatchSize)
			if err != nil {
				if ctx.Err() != nil {
					err = ctx.Err()
				}
				return nil, sdk.PartialDeletion(resp.DeletedCount, classify(fmt.Errorf("delete from %s: %w", t.name, err)))
			}
			n := tag.RowsAffected()
			resp.DeletedCount += n
			resp.Breakdown[t.name] += n
			if n > 0 {
				progress(resp.DeletedCount)
			}
			if n < int64(cfg.BatchSize) {
				break
			}
		}
	}
	if err := durable(ctx, pool); err != nil {
		return nil, sdk.PartialDeletion(resp.DeletedCount, classify(fmt.Errorf("flush deletes to disk: %w", err)))
	}
	return resp, nil
}

// durable waits until every batch committed so far is on disk (and on the
// synchronous standbys): a transaction with an id commits synchronously,
// and its commit record comes after theirs in the WAL.
func durable(ctx context.Context, pool *pgxpool.Pool) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = on`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT pg_current_xact_id()`)
		return err
	})
}

func quoteTable(name string) string {
	if schema, tbl, ok := strings.Cut(name, "."); ok {
		return pgx.Identifier{schema, tbl}.Sanitize()
	}
	return pgx.Identifier{name}.Sanitize()
}
