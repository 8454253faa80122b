package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/semaphore"

	"github.com/lifecycled/lifecycled/internal/sqldelete"
	"github.com/lifecycled/lifecycled/sdk"
)

const version = "1.1.0"

type config struct {
	sqldelete.Config

	// format is the daemon's tenant_id_format, for the rules that depend
	// on which ids can exist.
	format string
}

type deleter struct {
	mu     sync.Mutex
	pool   *pgxpool.Pool
	cfg    config
	format string // the daemon's tenant_id_format
	// fps computes plan fingerprints and remembers what they were
	// computed from, so that Delete can name what changed since the
	// daemon's check.
	fps sdk.Fingerprints
	// guard pins, on every connection, the session settings that change
	// what a delete does, and remembers what it found.
	guard *sessionGuard
	// deletes admits as many Deletes at once as the pool has pairs of
	// connections: a Delete holds one for its whole run (its proof's
	// recorded identities, in temporary tables of that session) and takes
	// another for each batch, so a Delete per connection would hold them
	// all and each wait for a second forever. Others wait their turn.
	deletes *semaphore.Weighted
}

// poolSize is the connections the deleter keeps to the database.
const poolSize = 4

func newDeleter() *deleter { return &deleter{deletes: semaphore.NewWeighted(poolSize / 2)} }

func (d *deleter) Configure(ctx context.Context, req *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	cfg := config{Config: sqldelete.Config{TenantColumn: "tenant_id", BatchSize: 5000, Schemas: []string{"public"}, LockTimeout: "1s", StatementTimeout: "30s"}}
	if err := sdk.DecodeConfig(req.Config, &cfg); err != nil {
		return nil, err
	}
	var problems []sdk.FieldError
	if cfg.DSN == "" {
		problems = append(problems, sdk.FieldError{Field: "dsn", Problem: "required, e.g. postgres://app@db/app"})
	}
	problems = append(problems, cfg.TenantColumnProblems()...)
	switch {
	case cfg.Discover && len(cfg.Tables) > 0:
		problems = append(problems, sdk.FieldError{Field: "tables", Problem: "set either tables or discover = true, not both"})
	case !cfg.Discover && len(cfg.Tables) == 0:
		problems = append(problems, sdk.FieldError{Field: "tables", Problem: "required (child tables first), or set discover = true"})
	}
	if cfg.BatchSize < 1 || cfg.BatchSize > 1_000_000 {
		problems = append(problems, sdk.FieldError{Field: "batch_size", Problem: "must be between 1 and 1000000"})
	}
	for _, field := range []struct{ name, value string }{{"lock_timeout", cfg.LockTimeout}, {"statement_timeout", cfg.StatementTimeout}} {
		if _, err := time.ParseDuration(field.value); err != nil {
			problems = append(problems, sdk.FieldError{Field: field.name, Problem: "must be a duration such as \"1s\""})
		}
	}
	var pcfg *pgxpool.Config
	if cfg.DSN != "" {
		var err error
		if pcfg, err = pgxpool.ParseConfig(cfg.DSN); err != nil {
			problems = append(problems, sdk.FieldError{Field: "dsn", Problem: "not a valid connection string"})
		}
	}
	if err := sdk.ValidateTenantIDFormat(req.TenantIDFormat); err != nil {
		problems = append(problems, sdk.FieldError{Field: "tenant_id_format", Problem: err.Error()})
	}
	if len(problems) > 0 {
		return nil, sdk.InvalidConfig(problems...)
	}
	cfg.format = req.TenantIDFormat
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
	pcfg.MaxConns = poolSize
	guard := &sessionGuard{}
	pcfg.AfterConnect = guard.afterConnect
	// Connection errors name the key the operator fixes.
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, classify(fmt.Errorf("dsn: connect: %w", err))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, classify(fmt.Errorf("dsn: connect: %w", err))
	}
	m, err := plan(ctx, pool, cfg, guard)
	if err != nil {
		pool.Close()
		return nil, err
	}
	warnings := warningsFor(cfg, m)
	d.mu.Lock()
	if d.pool != nil {
		d.pool.Close()
	}
	d.pool, d.cfg, d.format, d.guard = pool, cfg, req.TenantIDFormat, guard
	d.mu.Unlock()
	return &sdk.ConfigureResponse{PluginVersion: version, Warnings: warnings}, nil
}

// plan reads the schema as it is now and derives the deletion model from
// it, with the session settings the guard found.
func plan(ctx context.Context, pool *pgxpool.Pool, cfg config, guard *sessionGuard) (*model, error) {
	cat, err := loadCatalog(ctx, pool, cfg.TenantColumnNames())
	if err != nil {
		return nil, err
	}
	m, err := buildModel(cfg, cat)
	if err != nil {
		return nil, err
	}
	m.settings = guard.found()
	return m, nil
}

// ready is the configured pool, config and session guard, once the
// deleter is configured and the tenant id fits the daemon's format.
func (d *deleter) ready(tenant string) (*pgxpool.Pool, config, *sessionGuard, error) {
	d.mu.Lock()
	pool, cfg, format, guard := d.pool, d.cfg, d.format, d.guard
	d.mu.Unlock()
	return pool, cfg, guard, sqldelete.CheckReady(pool != nil, format, tenant)
}

// prepare is the common start of Count and Delete: the model for the schema
// as it is now, the tenant id checked against every tenant column's type,
// and the preflight.
func (d *deleter) prepare(ctx context.Context, tenant string) (*pgxpool.Pool, *model, config, error) {
	pool, cfg, guard, err := d.ready(tenant)
	if err != nil {
		return nil, nil, cfg, err
	}
	m, err := plan(ctx, pool, cfg, guard)
	if err != nil {
		return nil, nil, cfg, sqldelete.SchemaChanged(err)
	}
	for _, t := range append(append([]*logicalTable(nil), m.tables...), m.targets...) {
		if t.tenant != nil {
			if err := checkTenantID(tenant, t); err != nil {
				return nil, nil, cfg, err
			}
		}
	}
	if err := preflight(ctx, pool, m, tenant); err != nil {
		return nil, nil, cfg, err
	}
	return pool, m, cfg, nil
}

// Count counts, per table, the rows Delete would remove now: the tenant's
// rows in the set, and those a cascade takes from tables outside it.
func (d *deleter) Count(ctx context.Context, req *sdk.CountRequest) (*sdk.CountResponse, error) {
	pool, m, _, err := d.prepare(ctx, req.TenantID)
	if err != nil {
		return nil, err
	}
	breakdown, total, err := countRows(ctx, pool, m, req.TenantID)
	if err != nil {
		return nil, err
	}
	return &sdk.CountResponse{Count: total, Breakdown: breakdown}, nil
}

// countRows is Count's work, shared with Plan: per table of the set and
// cascade target, the tenant's rows now.
func countRows(ctx context.Context, pool *pgxpool.Pool, m *model, tenant string) (map[string]int64, int64, error) {
	breakdown := map[string]int64{}
	var total int64
	for _, t := range append(append([]*logicalTable(nil), m.tables...), m.targets...) {
		// Leaf by leaf, as Delete goes: the root alone would skip a
		// partition being detached concurrently, which Delete still empties.
		var parts []string
		for _, leaf := range t.leaves {
			p := &predicate{}
			parts = append(parts, fmt.Sprintf("(SELECT count(*) FROM ONLY %s a WHERE %s)", leaf.ident(), p.gone(t, "a")))
		}
		if len(parts) == 0 {
			continue
		}
		var n int64
		q := "SELECT " + strings.Join(parts, " + ")
		if err := pool.QueryRow(ctx, q, tenant).Scan(&n); err != nil {
			return nil, 0, classify(fmt.Errorf("count %s: %w", t.name(), err))
		}
		breakdown[t.name()] += n
		total += n
	}
	return breakdown, total, nil
}

// Delete deletes the tenant's rows in the model's order, child tables
// first, in batches of batch_size rows that each commit on their own, so no
// transaction holds row locks for long. Nothing is deleted when the
// preflight finds a row outside the tenant that the deletion would reach,
// nor when the daemon sent the fingerprint of the plan it checked and the
// schema read here gives another (sdk.PlanChanged, naming the change).
func (d *deleter) Delete(ctx context.Context, req *sdk.DeleteRequest, progress sdk.Progress) (*sdk.DeleteResponse, error) {
	if err := d.deletes.Acquire(ctx, 1); err != nil {
		return nil, sdk.PartialDeletion(0, sdk.Retryable(fmt.Errorf("waiting for another Delete to finish: %w", err), 0))
	}
	defer d.deletes.Release(1)
	pool, m, cfg, err := d.prepare(ctx, req.TenantID)
	if err != nil {
		return nil, sdk.PartialDeletion(0, err)
	}
	// The daemon checked the plan before this call; the schema may have
	// changed since. This model, read at the start of Delete, is the one
	// Delete deletes with: what it would reach must be what was checked.
	if err := d.fps.Check(req.PlanFingerprint, fingerprintLines(cfg, m)); err != nil {
		return nil, sdk.PartialDeletion(0, err)
	}
	if err := rehearse(ctx, pool, m, req.TenantID); err != nil {
		return nil, sdk.PartialDeletion(0, err)
	}
	var w *witness
	if proofEnabled {
		if w, err = record(ctx, pool, m, req.TenantID); err != nil {
			return nil, sdk.PartialDeletion(0, err)
		}
		defer w.close()
	}
	t := sqldelete.NewTally(m.names, progress)
	x := &eraser{pool: pool, m: m, tenant: req.TenantID, batch: cfg.BatchSize, tally: t}
	if err := x.run(ctx); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, sdk.PartialDeletion(t.Total, classify(err))
	}
	if err := durable(ctx, pool); err != nil {
		return nil, sdk.PartialDeletion(t.Total, classify(fmt.Errorf("flush deletes to disk: %w", err)))
	}
	var proof []sdk.ProofCheck
	if w != nil {
		if proof, err = w.check(ctx, req.TenantID, t.ByTable); err != nil {
			return nil, sdk.PartialDeletion(t.Total, err)
		}
	}
	if sdk.ProofLeft(proof) > 0 {
		return nil, sdk.PartialDeletion(t.Total, sdk.ProofFailure(proof))
	}
	return &sdk.DeleteResponse{DeletedCount: t.Total, Breakdown: t.ByTable, Proof: proof}, nil
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

// warningsFor lists the usual causes of slow deletes: no index on the tenant
// column, and no index on a key that the delete checks.
func warningsFor(cfg config, m *model) []string {
	var warnings []string
	for _, name := range m.unusedAcknowledgements(cfg) {
		warnings = append(warnings, fmt.Sprintf("acknowledged_hooks names %q, which is no DELETE trigger or rule on a table this deleter reaches", name))
	}
	for _, t := range m.tables {
		if t.tenant != nil && !t.rel.indexedFirst[t.tenant.name] {
			warnings = append(warnings, fmt.Sprintf("table %s has no index leading with %s: every delete batch scans the table (CREATE INDEX ON %s (%s))",
				t.name(), t.tenant.name, t.rel.ident(), pgx.Identifier{t.tenant.name}.Sanitize()))
		}
	}
	for _, e := range m.inbound {
		if e.childT == nil {
			warnings = append(warnings, fmt.Sprintf("table %s references %s (%s) but is not deleted by this deleter: erasing a tenant whose rows it references is refused (add it to tables instead of ignore_tables, or use discover = true)",
				e.child.qualified(), e.parent.qualified(), e.fk.name))
		}
		if !e.fk.fkIndexed {
			warnings = append(warnings, fmt.Sprintf("foreign key %s on %s (%s) has no index: deleting from %s checks it with a scan (CREATE INDEX ON %s (%s))",
				e.fk.name, e.child.qualified(), joinCols(e.fk.fkCols), e.parent.qualified(), e.child.ident(), joinCols(e.fk.fkCols)))
		}
	}
	sort.Strings(warnings)
	return warnings
}

// joinCols quotes and joins column names for a message or a suggestion.
func joinCols(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = pgx.Identifier{n}.Sanitize()
	}
	return strings.Join(out, ", ")
}
