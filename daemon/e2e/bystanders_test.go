package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/internal/seed001"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// TestErasureLeavesEveryBystanderUnchanged is issue 10's end-to-end proof:
// tenant A is erased from PostgreSQL, Redis and DynamoDB through the real
// daemon and plugins while every other tenant's rows, keys and items are
// checksummed before and after: B (an unrelated UUID), C (A's UUID in upper
// case, stored by the application as a separate string where the store
// allows it), D and E (A with a delimiter suffix, under a permissive
// tenant_id_format), and numeric tenants reached through other spellings.
func TestErasureLeavesEveryBystanderUnchanged(t *testing.T) {
	t.Parallel()
	t.Run("uuid spellings", func(t *testing.T) {
		e := newEstate(t)
		e.sql(t, seed001.WorkflowSchema("uuid")+`
			CREATE TABLE notes (id bigserial PRIMARY KEY, tenant_id text NOT NULL, body text);
			CREATE INDEX ON notes (tenant_id);`,
			"workflow_steps", "workflow_instances", "workflow_definitions", "notes")
		e.redisPatterns("session:{tenant}:*", "csrf:{tenant}:*")
		e.dynamoTable(t, "audit_logs", types.ScalarAttributeTypeS)

		a := uuid.NewString()
		upperA, b := strings.ToUpper(a), uuid.NewString()
		roles := map[string]string{a: "A", b: "B (unrelated UUID)", upperA: "C (A in upper case, a separate string)"}
		ctx := testsvc.Context(t, 2*time.Minute)
		for tenant, n := range map[string]int{a: 30, b: 20} {
			_, err := seed001.SeedWorkflows(ctx, e.pg, tenant, n)
			require.NoError(t, err)
		}
		// The uuid columns cannot hold C apart from A; the text column,
		// the Redis keys and the DynamoDB string key can.
		for tenant, n := range map[string]int{a: 5, b: 6, upperA: 4} {
			_, err := e.pg.Exec(ctx, `INSERT INTO notes (tenant_id, body) SELECT $1, 'note ' || g FROM generate_series(1, $2) g`, tenant, n)
			require.NoError(t, err)
			e.seedKeys(t, tenant, n+10)
			e.seedItems(t, "audit_logs", tenant, n*5)
		}
		before := e.read(t)
		require.Equal(t, 30*2+3+5+2*15+25, before.count[a])
		require.Equal(t, 4+2*14+20, before.count[upperA])

		d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Extra: deletionTuning +
			postgresBlockIgnoring("postgres:workflows", e.pgDSN, []string{"notes"}, "workflow_steps", "workflow_instances", "workflow_definitions") +
			postgresBlockIgnoring("postgres:notes", e.pgDSN, []string{"workflow_steps", "workflow_instances", "workflow_definitions"}, "notes") +
			redisBlock(e.redis.Addr, e.patterns...) +
			dynamoBlock("dynamodb:audit_logs", "audit_logs", e.dynamo)})
		testsvc.Eventually(t, time.Minute, apitest.Ready(d), "plugins ready")

		// The dry run in the upper-case spelling counts A, per table and
		// pattern, under A's canonical id.
		var counts struct {
			TenantID  string                      `json:"tenant_id"`
			Counts    map[string]int64            `json:"counts"`
			Breakdown map[string]map[string]int64 `json:"breakdown"`
			Total     int64                       `json:"total"`
			Complete  bool                        `json:"complete"`
		}
		var raw []byte
		apitest.Expect(t, d, 200, &counts).Counts(t.Context(), upperA, adminclient.Raw(&raw))
		wantBreakdown := map[string]map[string]int64{
			"postgres:workflows":  {"public.workflow_steps": 30, "public.workflow_instances": 30, "public.workflow_definitions": 3},
			"postgres:notes":      {"public.notes": 5},
			"redis:sessions":      {"session:{tenant}:*": 15, "csrf:{tenant}:*": 15},
			"dynamodb:audit_logs": {"audit_logs": 25},
		}
		require.Equal(t, a, counts.TenantID)
		require.Equal(t, wantBreakdown, counts.Breakdown)
		require.Equal(t, map[string]int64{"postgres:workflows": 63, "postgres:notes": 5, "redis:sessions": 30, "dynamodb:audit_logs": 25}, counts.Counts)
		require.True(t, counts.Complete)
		require.EqualValues(t, before.count[a], counts.Total)

		out, errOut, code := d.CLI("tenant", "count", upperA)
		require.Equal(t, 0, code, "%s\n%s", out, errOut)
		require.Regexp(t, `(?m)^postgres:workflows\s+63\n  public\.workflow_definitions\s+3\n  public\.workflow_instances\s+30\n  public\.workflow_steps\s+30$`, out)
		require.Regexp(t, `(?m)^  session:\{tenant\}:\*\s+15$`, out)
		out, _, code = d.CLI("--format", "json", "tenant", "count", upperA)
		require.Equal(t, 0, code)
		require.JSONEq(t, string(raw), out, "--format json is the API body")

		job := startErasure(t, d, upperA)
		require.Equal(t, a, job.TenantID, "the job is stored under the canonical id")
		done := settled(t, d, upperA, 2*time.Minute)
		require.Equal(t, "COMPLETED", done.Status, "%+v", done.Report.Failed)
		require.True(t, done.Verified)
		require.Equal(t, job.ID, done.ID)
		for name, want := range wantBreakdown {
			got := done.Report.Succeeded[name]
			require.Equal(t, counts.Counts[name], got.DeletedCount, name)
			require.Equal(t, want, got.Breakdown, "%s deleted exactly what was counted, per table and pattern", name)
			ver := done.Report.Verification[name]
			if ver.Method == "independent" {
				// An independent proof names only what it found left, and
				// must have checked something to be believed.
				require.Empty(t, ver.Breakdown, name)
				require.NotEmpty(t, ver.Checks, "%s: an independent proof with no checks proves nothing", name)
				for _, c := range ver.Checks {
					if c.Kind != "kept" {
						require.Zero(t, c.Found, "%s: %s %s", name, c.Kind, c.Target)
					}
				}
				continue
			}
			zero := map[string]int64{}
			for k := range want {
				zero[k] = 0
			}
			require.Equal(t, zero, ver.Breakdown, "%s verified per table and pattern", name)
		}

		after := e.read(t)
		require.Zero(t, after.count[a], "everything of A is gone: %v", after.lines[a])
		unchanged(t, before, after, a, roles)

		out, _, code = d.CLI("tenant", "status", upperA)
		require.Equal(t, 0, code)
		require.Regexp(t, `verified\s+true`, out)
		require.Regexp(t, `(?m)^  public\.notes\s+5$`, out)
		require.Contains(t, out, "VERIFIED")
	})

	t.Run("delimiter suffix with safe patterns", func(t *testing.T) {
		e, d, a, roles, before := delimiterEstate(t, "session|{tenant}|*", "feed/{tenant}/*")
		pluginsSettled(t, d, 3)
		startErasure(t, d, a)
		done := settled(t, d, a, 2*time.Minute)
		after := e.read(t)
		unchanged(t, before, after, a, roles)
		require.Equal(t, "COMPLETED", done.Status, "%+v", done.Report.Failed)
		require.True(t, done.Verified)
		require.Zero(t, after.count[a], "everything of A is gone: %v", after.lines[a])
	})

	// Needs the Redis plugin's refusal (issue 10 case 6): with a format
	// that allows ':' and '.', deleting "acme" with session:{tenant}:*
	// would also match every key of "acme:eu".
	t.Run("delimiter suffix with patterns that confuse tenants", func(t *testing.T) {
		e, d, a, roles, before := delimiterEstate(t, "session:{tenant}:*", "feed.{tenant}.*")
		pl := pluginsSettled(t, d, 3)
		startErasure(t, d, a)
		done := settled(t, d, a, 2*time.Minute)
		after := e.read(t)
		unchanged(t, before, after, a, roles)
		assert.NotEqual(t, "running", pl["redis:sessions"].State, "the Redis deleter refuses the patterns at Configure")
		assert.Contains(t, pl["redis:sessions"].LastError, "session:{tenant}:*", "the refusal names the pattern")
		// A refusal at Configure does not pass with retries: the job waits,
		// BLOCKED, for an operator to change the configuration.
		assert.Equal(t, "BLOCKED", done.Status, "a deleter that cannot run leaves the job unfinished")
		assert.False(t, done.Verified)
		assert.Contains(t, done.LastError, "session:{tenant}:*", "the job names the refusal")
	})

	// Needs the numeric key checks of the PostgreSQL and DynamoDB plugins
	// (issue 10 case 5): with a tenant_id_format sloppy enough to admit
	// them, other spellings of a number must delete nothing of the tenant
	// that number is.
	t.Run("numeric spellings", func(t *testing.T) {
		e := newEstate(t)
		e.sql(t, `CREATE TABLE accounts (id bigserial PRIMARY KEY, tenant_id bigint NOT NULL, name text);
			CREATE INDEX ON accounts (tenant_id);`, "accounts")
		e.redisPatterns("acct/{tenant}/*")
		e.dynamoTable(t, "events", types.ScalarAttributeTypeN)
		ctx := testsvc.Context(t, 2*time.Minute)
		// Each spelling below is another spelling of its own bystander, so
		// that what one spelling did is not hidden by another.
		for tenant, n := range map[string]int{"7": 5, "70": 3, "4": 6, "5": 2, "6": 3, "8": 4, "1000": 4, "2000": 2} {
			_, err := e.pg.Exec(ctx, `INSERT INTO accounts (tenant_id, name) SELECT $1::bigint, 'acct ' || g FROM generate_series(1, $2) g`, tenant, n)
			require.NoError(t, err)
			e.seedKeys(t, tenant, n)
			e.seedItems(t, "events", tenant, n)
		}
		before := e.read(t)
		roles := map[string]string{"70": "numeric tenant 70 (7 with a digit more)"}
		for _, n := range []string{"4", "5", "6", "8", "1000", "2000"} {
			roles[n] = "numeric tenant " + n
		}
		d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Daemon: `tenant_id_format = "^[-+ .0-9a-z]{1,20}$"`,
			Extra: deletionTuning + postgresBlock("postgres:accounts", e.pgDSN, "accounts") +
				redisBlock(e.redis.Addr, e.patterns...) + dynamoBlock("dynamodb:events", "events", e.dynamo)})
		pluginsSettled(t, d, 3)

		t.Run("the canonical spelling", func(t *testing.T) {
			startErasure(t, d, "7")
			done := settled(t, d, "7", 2*time.Minute)
			after := e.read(t)
			unchanged(t, before, after, "7", roles)
			require.Equal(t, "COMPLETED", done.Status, "%+v", done.Report.Failed)
			require.True(t, done.Verified)
			require.Zero(t, after.count["7"])
			before = after
		})
		for _, spelling := range []string{" 4", "+5", "06", "8.0", "1e3", "2000.0"} {
			t.Run(fmt.Sprintf("%q", spelling), func(t *testing.T) {
				prior := e.read(t) // what an earlier spelling did is that spelling's failure
				startErasure(t, d, spelling)
				done := settled(t, d, spelling, time.Minute)
				unchanged(t, prior, e.read(t), "", roles)
				assert.Equal(t, "BLOCKED", done.Status, "a store that would read %q as another number refuses it, for good", spelling)
				assert.Subset(t, done.failed(), []string{"dynamodb:events", "postgres:accounts"}, "both numeric stores refuse %q", spelling)
			})
		}
		// The refused jobs are BLOCKED, not retried: still nothing of anyone.
		time.Sleep(time.Second)
		unchanged(t, before, e.read(t), "", roles)
	})
}

// delimiterEstate seeds A = "acme" and bystanders that extend it with a
// delimiter (D "acme:eu", E "acme.eu") or not (B "globex"), under a
// permissive tenant_id_format that allows both delimiters, and starts a
// daemon whose Redis deleter uses patterns.
func delimiterEstate(t *testing.T, patterns ...string) (*estate, *testsvc.Daemon, string, map[string]string, holdings) {
	e := newEstate(t)
	e.sql(t, `CREATE TABLE notes (id bigserial PRIMARY KEY, tenant_id text NOT NULL, body text);
		CREATE INDEX ON notes (tenant_id);`, "notes")
	e.redisPatterns(patterns...)
	e.dynamoTable(t, "audit_logs", types.ScalarAttributeTypeS)
	const a = "acme"
	roles := map[string]string{"globex": "B (unrelated)", "acme:eu": "D (A + ':' suffix)", "acme.eu": "E (A + '.' suffix)"}
	for tenant, n := range map[string]int{a: 5, "globex": 3, "acme:eu": 4, "acme.eu": 6} {
		_, err := e.pg.Exec(testsvc.Context(t, time.Minute), `INSERT INTO notes (tenant_id, body) SELECT $1, 'note ' || g FROM generate_series(1, $2) g`, tenant, n)
		require.NoError(t, err)
		e.seedKeys(t, tenant, n)
		e.seedItems(t, "audit_logs", tenant, n)
	}
	before := e.read(t)
	for _, tenant := range []string{a, "globex", "acme:eu", "acme.eu"} {
		require.Positive(t, before.count[tenant], tenant)
	}
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Daemon: `tenant_id_format = "^[a-z0-9:._-]{1,64}$"`,
		Extra: deletionTuning + postgresBlock("postgres:notes", e.pgDSN, "notes") +
			redisBlock(e.redis.Addr, e.patterns...) + dynamoBlock("dynamodb:audit_logs", "audit_logs", e.dynamo)})
	return e, d, a, roles, before
}
