package main

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"golang.org/x/sync/semaphore"

	"github.com/lifecycled/lifecycled/internal/sqldelete"
	"github.com/lifecycled/lifecycled/sdk"
)

const version = "1.0.0"

type config struct {
	sqldelete.Config
	// SystemVersioned says what to do with a MariaDB system-versioned
	// table the erasure reaches: "refuse" (the default: its history keeps
	// every row a delete removes), or "delete_history" (after the delete,
	// DELETE HISTORY removes the table's whole history, every tenant's:
	// MariaDB cannot remove one tenant's).
	SystemVersioned string `json:"system_versioned"`

	// format is the daemon's tenant_id_format, for the rules that depend
	// on which ids can exist.
	format string

	database string // the DSN's database: where unqualified table names are
	// asked are the pinned session variables the DSN asked for.
	asked map[string]string
}

type deleter struct {
	mu     sync.Mutex
	db     *sql.DB
	cfg    config
	format string // the daemon's tenant_id_format
	// fps computes plan fingerprints and remembers what they were
	// computed from, so that Delete can name what changed since the
	// daemon's check.
	fps sdk.Fingerprints
	// deletes admits as many Deletes at once as the pool has pairs of
	// connections: a Delete holds one for its whole run (its proof's
	// recorded identities, in temporary tables of that session) and takes
	// another for each batch, so a Delete per connection would hold them
	// all and each wait for a second forever. Others wait their turn.
	deletes *semaphore.Weighted
}

// poolSize is the connections the deleter keeps to the server.
const poolSize = 4

func newDeleter() *deleter { return &deleter{deletes: semaphore.NewWeighted(poolSize / 2)} }

// driverLog sends go-sql-driver's own messages to the SDK's logger, which
// scrubs secrets; its default logger writes to stderr past the scrubber.
type driverLog struct{}

func (driverLog) Print(v ...any) {
	sdk.Logger().Warn("mysql driver: " + strings.TrimSpace(fmt.Sprint(v...)))
}

// safeName is what a character set or collation name may be, since it is
// written into statements (it comes from the server's catalogue).
var safeName = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

func (d *deleter) Configure(ctx context.Context, req *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	cfg := config{Config: sqldelete.Config{TenantColumn: "tenant_id", BatchSize: 5000, LockTimeout: "1s", StatementTimeout: "30s"}, SystemVersioned: "refuse"}
	if err := sdk.DecodeConfig(req.Config, &cfg); err != nil {
		return nil, err
	}
	var problems []sdk.FieldError
	var mcfg *mysql.Config
	if cfg.DSN == "" {
		problems = append(problems, sdk.FieldError{Field: "dsn", Problem: "required, e.g. app@tcp(db:3306)/app"})
	} else if c, err := mysql.ParseDSN(cfg.DSN); err != nil {
		problems = append(problems, sdk.FieldError{Field: "dsn", Problem: "not a go-sql-driver DSN (user:password@tcp(host:3306)/database): " + err.Error()})
	} else if c.DBName == "" {
		problems = append(problems, sdk.FieldError{Field: "dsn", Problem: "must name the database: user:password@tcp(host:3306)/database"})
	} else {
		mcfg = c
		cfg.database = c.DBName
	}
	problems = append(problems, cfg.TenantColumnProblems()...)
	switch {
	case cfg.Discover && len(cfg.Tables) > 0:
		problems = append(problems, sdk.FieldError{Field: "tables", Problem: "set either tables or discover = true, not both"})
	case !cfg.Discover && len(cfg.Tables) == 0:
		problems = append(problems, sdk.FieldError{Field: "tables", Problem: "required (child tables first), or set discover = true"})
	case !cfg.Discover && len(cfg.Schemas) > 0:
		problems = append(problems, sdk.FieldError{Field: "schemas", Problem: "only with discover = true (name tables as schema.table)"})
	}
	if cfg.SystemVersioned != "refuse" && cfg.SystemVersioned != "delete_history" {
		problems = append(problems, sdk.FieldError{Field: "system_versioned", Problem: `must be "refuse" or "delete_history"`})
	}
	if cfg.BatchSize < 1 || cfg.BatchSize > 1_000_000 {
		problems = append(problems, sdk.FieldError{Field: "batch_size", Problem: "must be between 1 and 1000000"})
	}
	lt, err := time.ParseDuration(cfg.LockTimeout)
	if err != nil || lt < time.Second || lt > time.Hour {
		problems = append(problems, sdk.FieldError{Field: "lock_timeout", Problem: "must be a duration from \"1s\" to \"1h\" (InnoDB counts whole seconds)"})
	}
	st, err := time.ParseDuration(cfg.StatementTimeout)
	if err != nil || st < time.Second {
		problems = append(problems, sdk.FieldError{Field: "statement_timeout", Problem: "must be a duration of at least \"1s\""})
	}
	if err := sdk.ValidateTenantIDFormat(req.TenantIDFormat); err != nil {
		problems = append(problems, sdk.FieldError{Field: "tenant_id_format", Problem: err.Error()})
	}
	if len(problems) > 0 {
		return nil, sdk.InvalidConfig(problems...)
	}
	if cfg.Discover && len(cfg.Schemas) == 0 {
		cfg.Schemas = []string{cfg.database}
	}
	cfg.format = req.TenantIDFormat
	if cfg.Password != "" {
		mcfg.Passwd = cfg.Password
	}
	if mcfg.Timeout == 0 {
		mcfg.Timeout = 5 * time.Second
	}
	mcfg.Logger = driverLog{}
	if mcfg.Params == nil {
		mcfg.Params = map[string]string{}
	}
	// Every batch is its own short transaction; waiting long for a row
	// lock would hold up the application, so give up and retry later.
	mcfg.Params["innodb_lock_wait_timeout"] = fmt.Sprint(int(math.Ceil(lt.Seconds())))
	db, err := d.open(ctx, mcfg)
	if err != nil {
		return nil, classify(fmt.Errorf("dsn: connect: %w", err))
	}
	// The statement timeout is a session variable whose name and unit
	// differ between MariaDB and MySQL.
	var ver string
	if err := db.QueryRowContext(ctx, `SELECT VERSION()`).Scan(&ver); err != nil {
		db.Close()
		return nil, classify(fmt.Errorf("dsn: connect: %w", err))
	}
	db.Close()
	mariadb := strings.Contains(strings.ToLower(ver), "mariadb")
	if mariadb {
		mcfg.Params["max_statement_time"] = fmt.Sprint(st.Seconds())
	} else {
		mcfg.Params["max_execution_time"] = fmt.Sprint(st.Milliseconds())
	}
	cfg.asked = pinSession(mcfg, mariadb)
	if db, err = d.open(ctx, mcfg); err != nil {
		return nil, classify(fmt.Errorf("dsn: connect: %w", err))
	}
	m, _, err := plan(ctx, db, cfg)
	if err != nil {
		db.Close()
		return nil, err
	}
	d.mu.Lock()
	if d.db != nil {
		d.db.Close()
	}
	d.db, d.cfg, d.format = db, cfg, req.TenantIDFormat
	d.mu.Unlock()
	return &sdk.ConfigureResponse{PluginVersion: version, Warnings: warningsFor(cfg, m)}, nil
}

// open connects with mcfg and checks the server answers.
func (d *deleter) open(ctx context.Context, mcfg *mysql.Config) (*sql.DB, error) {
	conn, err := mysql.NewConnector(mcfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(poolSize)
	db.SetConnMaxIdleTime(time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// plan reads the schema as it is now and derives the deletion model.
func plan(ctx context.Context, db *sql.DB, cfg config) (*model, *catalog, error) {
	cat, err := loadCatalog(ctx, db, cfg.TenantColumnNames())
	if err != nil {
		return nil, nil, err
	}
	m, err := buildModel(cfg, cat)
	if err != nil {
		return nil, nil, err
	}
	whole := map[string]bool{cfg.database: true}
	for _, t := range m.order {
		whole[t.cat.key[0]] = true
	}
	if err := checkWholeSchemas(ctx, db, whole); err != nil {
		return nil, nil, err
	}
	for _, t := range append(append([]*logicalTable(nil), m.tables...), m.targets...) {
		if c := t.tenant; c != nil && c.kind() == kindText && (!safeName.MatchString(c.charset) || !safeName.MatchString(c.collation)) {
			return nil, nil, sdk.InvalidConfig(sdk.FieldError{Field: fieldOf(cfg, t), Problem: fmt.Sprintf(
				"%s.%s has character set %q and collation %q, which the deleter cannot name in a statement", t.name(), c.name, c.charset, c.collation)})
		}
	}
	return m, cat, nil
}

// ready is the configured connection and config, once the deleter is
// configured and the tenant id fits the daemon's format.
func (d *deleter) ready(tenant string) (*sql.DB, config, error) {
	d.mu.Lock()
	db, cfg, format := d.db, d.cfg, d.format
	d.mu.Unlock()
	return db, cfg, sqldelete.CheckReady(db != nil, format, tenant)
}

// prepare is the common start of Count and Delete: the model for the schema
// as it is now, the tenant id checked against every tenant column, and the
// preflight.
func (d *deleter) prepare(ctx context.Context, tenant string) (*sql.DB, *model, config, map[*logicalTable]any, error) {
	db, cfg, err := d.ready(tenant)
	if err != nil {
		return nil, nil, cfg, nil, err
	}
	m, _, err := plan(ctx, db, cfg)
	if err != nil {
		return nil, nil, cfg, nil, sqldelete.SchemaChanged(err)
	}
	vals := map[*logicalTable]any{}
	charsets := map[string]bool{}
	for _, t := range m.bystanders {
		// A bystander is only counted: an id its column cannot hold has no
		// rows there to count.
		if v, err := tenantArg(tenant, *t.tenant, ""); err == nil && t.tenant.kind() != kindText {
			vals[t] = v
		} else if err == nil && safeName.MatchString(t.tenant.charset) && safeName.MatchString(t.tenant.collation) {
			vals[t] = v
		}
	}
	var watched []*logicalTable
	for _, t := range m.bystanders {
		if _, ok := vals[t]; ok {
			watched = append(watched, t)
		}
	}
	m.bystanders = watched
	for _, t := range append(append([]*logicalTable(nil), m.tables...), m.targets...) {
		if t.tenant == nil {
			continue
		}
		v, err := tenantArg(tenant, *t.tenant, fmt.Sprintf("%s.%s is %s", t.name(), t.tenant.name, t.tenant.columnType))
		if err != nil {
			return nil, nil, cfg, nil, err
		}
		vals[t] = v
		if t.tenant.kind() == kindText {
			charsets[t.tenant.charset] = true
		}
	}
	if err := representable(ctx, db, tenant, charsets); err != nil {
		return nil, nil, cfg, nil, err
	}
	if err := preflight(ctx, db, m, vals); err != nil {
		return nil, nil, cfg, nil, err
	}
	return db, m, cfg, vals, nil
}

// representable refuses an id that a tenant column's character set cannot
// hold: the server would convert it with '?' in place of what it lacks, and
// the byte-for-byte comparison would then match another tenant's id.
func representable(ctx context.Context, db *sql.DB, tenant string, charsets map[string]bool) error {
	names := make([]string, 0, len(charsets))
	for cs := range charsets {
		names = append(names, cs)
	}
	sort.Strings(names)
	for _, cs := range names {
		var ok bool
		q := fmt.Sprintf(`SELECT CAST(CONVERT(CONVERT(? USING %s) USING utf8mb4) AS BINARY) = CAST(? AS BINARY)`, cs)
		if err := db.QueryRowContext(ctx, q, tenant, tenant).Scan(&ok); err != nil {
			return classify(fmt.Errorf("check the tenant id against character set %s: %w", cs, err))
		}
		if !ok {
			return sdk.InvalidArgument("tenant id %q has characters that character set %s cannot hold: compared in it, it would match another id", tenant, cs)
		}
	}
	return nil
}

// Delete deletes the tenant's rows in the model's order, children first,
// in batches of batch_size rows that each commit on their own. Nothing is
// deleted when the preflight finds a row outside the tenant that the
// deletion would reach, nor when the daemon sent the fingerprint of the
// plan it checked and the schema read here gives another (sdk.PlanChanged,
// naming the change).
func (d *deleter) Delete(ctx context.Context, req *sdk.DeleteRequest, progress sdk.Progress) (*sdk.DeleteResponse, error) {
	if err := d.deletes.Acquire(ctx, 1); err != nil {
		return nil, sdk.PartialDeletion(0, sdk.Retryable(fmt.Errorf("waiting for another Delete to finish: %w", err), 0))
	}
	defer d.deletes.Release(1)
	db, m, cfg, vals, err := d.prepare(ctx, req.TenantID)
	if err != nil {
		return nil, sdk.PartialDeletion(0, err)
	}
	// The daemon checked the plan before this call; the schema may have
	// changed since. This model, read at the start of Delete, is the one
	// Delete deletes with: what it would reach must be what was checked.
	if err := d.fps.Check(req.PlanFingerprint, fingerprintLines(cfg, m)); err != nil {
		return nil, sdk.PartialDeletion(0, err)
	}
	t := sqldelete.NewTally(m.names, progress)
	if err := rehearse(ctx, db, m, vals); err != nil {
		return nil, sdk.PartialDeletion(0, err)
	}
	w, err := record(ctx, db, m, vals)
	if err != nil {
		return nil, sdk.PartialDeletion(0, err)
	}
	defer w.close()
	x := &eraser{db: db, m: m, vals: vals, batch: cfg.BatchSize, tally: t}
	if err := x.run(ctx); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, sdk.PartialDeletion(t.Total, classify(err))
	}
	proof, err := w.check(ctx)
	if err != nil {
		return nil, sdk.PartialDeletion(t.Total, err)
	}
	if sdk.ProofLeft(proof) > 0 {
		return nil, sdk.PartialDeletion(t.Total, sdk.ProofFailure(proof))
	}
	return &sdk.DeleteResponse{DeletedCount: t.Total, Breakdown: t.ByTable, Proof: proof}, nil
}

// warningsFor lists the usual cause of slow deletes: no index leading with
// the tenant column (InnoDB indexes foreign key columns itself).
func warningsFor(cfg config, m *model) []string {
	var warnings []string
	for _, name := range m.unusedAcknowledgements(cfg) {
		warnings = append(warnings, fmt.Sprintf("acknowledged_hooks names %q, which is no BEFORE DELETE trigger on a table this deleter reaches", name))
	}
	for _, t := range m.tables {
		if t.tenant != nil && !t.cat.indexedFirst[t.tenant.name] {
			warnings = append(warnings, fmt.Sprintf("table %s has no index leading with %s: every delete batch scans the table (CREATE INDEX ... ON %s (%s))",
				t.name(), t.tenant.name, t.cat.ident(), quoteIdent(t.tenant.name)))
		}
		if t.cat.engine != "" && !strings.EqualFold(t.cat.engine, "InnoDB") {
			warnings = append(warnings, fmt.Sprintf("table %s uses the %s engine, which has neither foreign keys nor transactions: a batch cut short is not rolled back", t.name(), t.cat.engine))
		}
	}
	for _, t := range m.targets {
		var via []string
		for _, e := range t.cascadeFrom {
			via = append(via, e.fk.name)
		}
		warnings = append(warnings, fmt.Sprintf("table %s is not listed, but ON DELETE CASCADE (%s) reaches it: the deleter deletes the tenant's rows there that the cascade would, first, and counts them under %s",
			t.name(), strings.Join(via, ", "), t.name()))
	}
	for _, e := range m.inbound {
		if e.childT == nil {
			warnings = append(warnings, fmt.Sprintf("table %s references %s (%s) but is not deleted by this deleter: erasing a tenant whose rows it references is refused (add it to tables, or use discover = true)",
				e.child.name(), e.parent.name(), e.fk.name))
		}
	}
	sort.Strings(warnings)
	return warnings
}
