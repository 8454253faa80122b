package erasurefuzz

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // the pgx driver for database/sql

	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest"
)

// defaultSeeds is how many seeds `make test` runs per dialect; SEEDS=N
// runs more (make fuzz-erasure), FUZZ_FIRST_SEED moves the window.
const defaultSeeds = 150

// workers run seeds side by side, each with a plugin and a database of
// its own.
const workers = 2

func seedWindow(t *testing.T) (first, n uint64) {
	first, n = 1, defaultSeeds
	if v := os.Getenv("SEEDS"); v != "" {
		x, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SEEDS=%q: %v", v, err)
		}
		n = x
	}
	if v := os.Getenv("FUZZ_FIRST_SEED"); v != "" {
		x, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("FUZZ_FIRST_SEED=%q: %v", v, err)
		}
		first = x
	}
	return first, n
}

// newEnv starts a plugin of the dialect and gives it a database of its own.
func newEnv(t *testing.T, d Dialect) *Env {
	t.Helper()
	switch d {
	case Postgres:
		dsn := testsvc.PGDatabase(t)
		admin, err := sql.Open("pgx", dsn+sep(dsn)+"default_query_exec_mode=simple_protocol")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { admin.Close() })
		p := plugintest.Launch(t, testsvc.Binary(t, "lifecycled-plugin-postgres"), sdk.KindTenantDeleter)
		return &Env{Dialect: d, Admin: admin, DSN: dsn, Deleter: p.Deleter(t)}
	default:
		testsvc.MySQLAdmin(t) // fails clearly when the server is missing
		cfg, err := mysql.ParseDSN(testsvc.MySQLAdminDSN())
		if err != nil {
			t.Fatal(err)
		}
		cfg.MultiStatements = true
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			t.Fatal(err)
		}
		admin := sql.OpenDB(conn)
		t.Cleanup(func() { admin.Close() })
		p := plugintest.Launch(t, testsvc.Binary(t, "lifecycled-plugin-mysql"), sdk.KindTenantDeleter)
		return &Env{Dialect: d, Admin: admin, DSN: testsvc.MySQLAdminDSN(), Deleter: p.Deleter(t)}
	}
}

func sep(dsn string) string {
	if strings.Contains(dsn, "?") {
		return "&"
	}
	return "?"
}

func TestSchemaFuzzPostgres(t *testing.T) { fuzz(t, Postgres) }
func TestSchemaFuzzMariaDB(t *testing.T)  { fuzz(t, MariaDB) }

// regressions are the seeds that broke the invariant, named by what they
// found (each fixed; the plugins' own tests hold the same cases written
// out, which stay true whatever the generator becomes).
var regressions = []struct {
	name    string
	dialect Dialect
	seed    uint64
}{
	{"uuid and text tenant columns compared with one parameter", Postgres, 3},
	{"text and uuid tenant columns compared with one parameter", Postgres, 6},
	{"uuid tenant column referenced from a text one", Postgres, 13},
	{"text tenant column referenced from a uuid one", Postgres, 25},
	{"cascade given up in a cycle removes rows an audited child references", Postgres, 2028},
	{"cascade given up in a cycle removes rows a table outside it references", Postgres, 2291},
	{"cascade given up in a cycle removes rows its parent references", Postgres, 2437},
	{"cascade given up in a cycle into a partitioned table", Postgres, 2543},
	{"acknowledged soft-delete trigger keeps rows a key references", Postgres, 2105},
	{"cascade into a table whose plain self key references the removed rows", MariaDB, 2513},
	{"clean-up trigger deleting rows other rows reference", MariaDB, 466},
	{"clean-up trigger deleting parent rows first", MariaDB, 568},
	{"clean-up trigger deleting a self-referenced row", MariaDB, 879},
	{"clean-up trigger on a table whose deletes cascade: the cascade counted twice", MariaDB, 40403},
}

func TestSchemaFuzzRegressions(t *testing.T) {
	t.Parallel()
	envs := map[Dialect]*Env{Postgres: newEnv(t, Postgres), MariaDB: newEnv(t, MariaDB)}
	for _, r := range regressions {
		t.Run(r.name, func(t *testing.T) {
			res, err := runSeed(envs[r.dialect], r.seed)
			if err != nil {
				t.Fatalf("seed %d (%s): %v", r.seed, r.dialect, err)
			}
			if len(res.Violations) > 0 {
				t.Fatalf("seed %d (%s) broke the invariant (%s: %s):\n  %s\n%s", r.seed, r.dialect, res.Outcome, res.Detail,
					strings.Join(res.Violations, "\n  "), Generate(r.dialect, r.seed).Describe())
			}
		})
	}
}

// fuzz runs the seed window on the dialect and fails on every seed that
// broke the invariant, with the seed's schema to reproduce it.
func fuzz(t *testing.T, d Dialect) {
	t.Parallel()
	first, n := seedWindow(t)
	list := seedList(t)
	seeds := make(chan uint64)
	go func() {
		defer close(seeds)
		if list != nil {
			for _, s := range list {
				seeds <- s
			}
			return
		}
		for s := first; s < first+n; s++ {
			seeds <- s
		}
	}()
	var mu sync.Mutex
	outcomes := map[Outcome]int{}
	features := map[string]int{}
	reasons := map[string]int{}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		env := newEnv(t, d)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seed := range seeds {
				res, err := runSeed(env, seed)
				mu.Lock()
				switch {
				case err != nil:
					t.Errorf("seed %d (%s): %v", seed, d, err)
				case len(res.Violations) > 0:
					t.Errorf("seed %d (%s) broke the invariant (%s, %d attempts: %s; features %v):\n  %s\n%s", seed, d, res.Outcome, res.Attempts, res.Detail,
						res.Notes, strings.Join(res.Violations, "\n  "), Generate(d, seed).Describe())
				}
				outcomes[res.Outcome]++
				if res.Outcome != Erased {
					reasons[string(res.Outcome)+": "+reason(res.Detail)]++
				}
				for _, f := range res.Notes {
					features[f]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	ran := fmt.Sprintf("%d seeds from %d", n, first)
	if list != nil {
		ran = fmt.Sprintf("seeds %v", list)
	}
	t.Logf("%s: %s: outcomes %v; features %v", d, ran, outcomes, sortedCounts(features))
	if os.Getenv("FUZZ_REASONS") != "" {
		t.Logf("why not erased:\n%s", strings.ReplaceAll(sortedCounts(reasons), ", ", "\n"))
	}
}

func runSeed(env *Env, seed uint64) (Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return env.Run(ctx, seed)
}

func sortedCounts(m map[string]int) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s: %d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// reason shortens an error to what kind of refusal it is: its words, not
// the names and numbers of the seed.
func reason(detail string) string {
	detail = regexp.MustCompile(`fz_[0-9]+\.[A-Za-z0-9_]+|[0-9]+|"[^"]*"|\([^)]*\)`).ReplaceAllString(detail, "_")
	if len(detail) > 160 {
		detail = detail[:160]
	}
	return strings.ReplaceAll(detail, ",", ";")
}

// seedList is FUZZ_SEEDS: a comma-separated list of seeds to run instead
// of the window (to reproduce failures).
func seedList(t *testing.T) []uint64 {
	v := os.Getenv("FUZZ_SEEDS")
	if v == "" {
		return nil
	}
	var out []uint64
	for _, f := range strings.Split(v, ",") {
		x, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
		if err != nil {
			t.Fatalf("FUZZ_SEEDS=%q: %v", v, err)
		}
		out = append(out, x)
	}
	return out
}
