package erasurefuzz

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/lifecycled/lifecycled/sdk"
)

// Env is where seeds run: a database server the generator may create
// schemas (PostgreSQL) or databases (MariaDB) on, and a configured-per-seed
// deleter plugin of the dialect.
type Env struct {
	Dialect Dialect
	// Admin runs the generator's scripts (multiple statements at once) and
	// reads snapshots.
	Admin *sql.DB
	// DSN is the base DSN the plugin connects with: a database URL
	// (PostgreSQL), or a go-sql-driver DSN whose database Run replaces
	// (MariaDB).
	DSN     string
	Deleter sdk.TenantDeleter
	// seeds counts the seeds run, to vacuum PostgreSQL's catalogue now
	// and then: ten thousand schemas created and dropped in one database
	// leave it bloated, and every catalogue read slower.
	seeds int
}

// Outcome is how a seed's erasure ended.
type Outcome string

// The outcomes the invariant allows.
const (
	// Configured: the plugin refused the config (a schema it cannot erase
	// from honestly); nothing ran.
	Refused Outcome = "refused at configure"
	// RefusedBefore: Delete refused before deleting anything.
	RefusedBefore Outcome = "refused before deleting"
	// Erased: the tenant is gone, verified by the proof.
	Erased Outcome = "erased"
	// Unverified: Delete failed part way or the proof found rows left, and
	// it says so (the daemon would not sign a receipt).
	Unverified Outcome = "unverified"
)

// Result is one seed's outcome, or the invariant it broke.
type Result struct {
	Seed     uint64
	Outcome  Outcome
	Attempts int
	Detail   string
	// Violations are the broken parts of the invariant; empty when it held.
	Violations []string
	Notes      []string
}

const ctxTimeoutNote = "the seed's context ended"

// Run generates the seed's schema, erases tenant A through the plugin as
// the daemon would (Delete, then Verify, a Delete again while the proof
// finds rows left, three attempts at most) and checks the invariant.
func (env *Env) Run(ctx context.Context, seed uint64) (res Result, err error) {
	s := Generate(env.Dialect, seed)
	res = Result{Seed: seed, Notes: s.Notes}
	if err := env.create(ctx, s); err != nil {
		return res, fmt.Errorf("seed %d: create the schema: %w", seed, err)
	}
	defer func() {
		if derr := env.drop(context.WithoutCancel(ctx), s); derr != nil && err == nil {
			err = derr
		}
	}()
	start, err := s.take(ctx, env.Admin)
	if err != nil {
		return res, err
	}
	violate := func(format string, args ...any) {
		res.Violations = append(res.Violations, fmt.Sprintf(format, args...))
	}

	cfg := map[string]any{"dsn": env.pluginDSN(s)}
	for k, v := range s.Config {
		cfg[k] = v
	}
	if _, err := env.Deleter.Configure(ctx, &sdk.ConfigureRequest{Name: "fuzz", Config: cfg, TenantIDFormat: tenantIDFormat}); err != nil {
		res.Outcome, res.Detail = Refused, err.Error()
		if ctx.Err() != nil {
			return res, errors.New(ctxTimeoutNote)
		}
		if !errors.Is(err, sdk.ErrInvalidConfig) {
			// A refusal names what in the schema or config cannot be
			// erased; anything else (a failed statement, a connection the
			// plugin could not make) is a defect.
			violate("Configure failed with something other than a refusal: %v", err)
		}
		return res, nil
	}
	verifier, _ := env.Deleter.(sdk.Verifier)
	tenant := s.Tenants[erased]
	before := start
	for res.Attempts < 3 {
		res.Attempts++
		resp, derr := env.Deleter.Delete(ctx, &sdk.DeleteRequest{TenantID: tenant}, nil)
		after, err := s.take(ctx, env.Admin)
		if err != nil {
			return res, err
		}
		if derr != nil {
			res.Detail = derr.Error()
			if strings.Contains(derr.Error(), "refused before deleting anything") || strings.Contains(derr.Error(), "the schema changed since") {
				if res.Attempts == 1 {
					res.Outcome = RefusedBefore
				}
				if ch := changed(before, after); len(ch) > 0 {
					violate("a refusal before deleting anything changed %v", ch)
				}
			} else {
				res.Outcome = Unverified
				_, acknowledged := s.Config["acknowledged_hooks"]
				if !strings.Contains(derr.Error(), "independent proof found rows left") && !acknowledged {
					// Delete may stop part way only because of what an
					// acknowledged hook kept (the proof finds the rows, or a
					// key still references them); any other failure (a
					// statement the server refused, a key the preflight did
					// not foresee) is a defect.
					violate("attempt %d: Delete failed part way: %v", res.Attempts, derr)
				}
			}
			before = after
			break
		}
		// Counts: total, breakdown and the rows really removed are one number.
		gone := removed(before, after)
		if s.Audit != nil {
			// Audit rows a trigger wrote during the attempt and the erasure
			// removed again were removed too: every written row is either
			// still there, or gone.
			name := s.qualName(s.Audit)
			grew := int64(len(after.rows[name])) - int64(len(before.rows[name])) + gone[name]
			gone[name] += after.written - before.written - grew
		}
		var total int64
		want := map[string]int64{}
		for name, n := range gone {
			if n > 0 {
				want[name] = n
				total += n
			}
		}
		got := map[string]int64{}
		var sum int64
		for name, n := range resp.Breakdown {
			sum += n
			if n != 0 {
				got[name] = n
			}
		}
		if resp.DeletedCount != total || sum != total || !equalCounts(got, want) {
			violate("attempt %d: reported %d deleted, breakdown %v (sum %d); really removed %d: %v", res.Attempts, resp.DeletedCount, got, sum, total, want)
		}
		if sdk.ProofLeft(resp.Proof) > 0 {
			violate("attempt %d: Delete succeeded with a proof that found rows left: %+v", res.Attempts, resp.Proof)
		}
		before = after
		if verifier == nil {
			violate("the plugin does not implement Verify")
			break
		}
		v, err := verifier.Verify(ctx, &sdk.VerifyRequest{TenantID: tenant})
		if err != nil {
			res.Outcome, res.Detail = Unverified, "verify: "+err.Error()
			break
		}
		if v.Left() == 0 {
			res.Outcome = Erased
			break
		}
		res.Outcome, res.Detail = Unverified, fmt.Sprintf("the proof found %d left: %s", v.Left(), leftChecks(v.Checks))
	}
	if ch := s.othersChanged(start, before); len(ch) > 0 {
		violate("rows of other tenants, global or nobody's changed: %v", ch)
	}
	left := s.tenantLeft(before)
	switch {
	case res.Outcome == Erased && len(left) > 0:
		violate("verified, but the tenant's rows remain: %v", left)
	case res.Outcome == Unverified && len(left) == 0 && strings.HasPrefix(res.Detail, "the proof found"):
		violate("the proof found rows left, but the tenant's rows are gone (%s)", res.Detail)
	}
	return res, nil
}

func equalCounts(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func leftChecks(checks []sdk.ProofCheck) string {
	var parts []string
	for _, c := range checks {
		if c.Left() {
			parts = append(parts, fmt.Sprintf("%s %s: %d", c.Kind, c.Target, c.Found))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// create runs the seed's script.
func (env *Env) create(ctx context.Context, s *Schema) error {
	if s.has(MariaDB) {
		if _, err := env.Admin.ExecContext(ctx, "CREATE DATABASE "+s.quote(s.Name)+" CHARACTER SET utf8mb4"); err != nil {
			return err
		}
	}
	for i, stmt := range s.Script() {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		if _, err := env.Admin.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("script part %d: %w\n%s", i, err, stmt)
		}
	}
	return nil
}

func (env *Env) drop(ctx context.Context, s *Schema) error {
	q := "DROP SCHEMA IF EXISTS " + s.quote(s.Name) + " CASCADE"
	if s.has(MariaDB) {
		q = "DROP DATABASE IF EXISTS " + s.quote(s.Name)
	}
	if _, err := env.Admin.ExecContext(ctx, q); err != nil {
		return err
	}
	env.seeds++
	if s.has(Postgres) && env.seeds%200 == 0 {
		// Best effort: a role that may not vacuum the catalogue only runs
		// slower.
		_, _ = env.Admin.ExecContext(ctx, "VACUUM pg_catalog.pg_class, pg_catalog.pg_attribute, pg_catalog.pg_type, pg_catalog.pg_depend, "+
			"pg_catalog.pg_constraint, pg_catalog.pg_index, pg_catalog.pg_trigger, pg_catalog.pg_proc, pg_catalog.pg_namespace, pg_catalog.pg_attrdef, pg_catalog.pg_inherits")
	}
	return nil
}

// pluginDSN is the DSN the plugin gets for a seed, with its settings.
func (env *Env) pluginDSN(s *Schema) string {
	if s.has(Postgres) {
		u, err := url.Parse(env.DSN)
		if err != nil {
			return env.DSN
		}
		// libpq options are spaces and equals signs, escaped as %20 and
		// %3D (a "+" would reach the server as a plus sign).
		raw := u.RawQuery
		for k, v := range s.Settings {
			if raw != "" {
				raw += "&"
			}
			raw += k + "=" + strings.ReplaceAll(url.QueryEscape(v), "+", "%20")
		}
		u.RawQuery = raw
		return u.String()
	}
	cfg, err := mysql.ParseDSN(env.DSN)
	if err != nil {
		return env.DSN
	}
	cfg.DBName = s.Name
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	for k, v := range s.Settings {
		cfg.Params[k] = v
	}
	return cfg.FormatDSN()
}

// Describe is the seed's schema, data and config, for a failure report.
func (s *Schema) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "-- seed %d (%s), tenants %v, settings %v\n-- config %v\n", s.Seed, s.Dialect, s.Tenants, s.Settings, s.Config)
	for _, part := range s.Script() {
		b.WriteString(part)
		b.WriteString("\n")
	}
	return b.String()
}

// tenantIDFormat is the daemon's tenant_id_format the seeds run under:
// letters, digits and hyphens, as most deployments' ids (uuids, slugs,
// numbers). It allows no blank, so tables may mix char(n) and varchar
// tenant columns.
const tenantIDFormat = `^[A-Za-z0-9-]{1,64}$`
