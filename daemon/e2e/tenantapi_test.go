package e2e

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// apiJob is a deletion job as a client of the admin API reads it.
type apiJob struct {
	ID       string `json:"id"`
	TenantID string `json:"tenant_id"`
	Status   string `json:"status"`
	Attempts int    `json:"attempts"`
	Verified bool   `json:"verified"`
	// LastError is why the job stopped, BLOCKED or FAILED.
	LastError string `json:"last_error"`
	Report    struct {
		Succeeded map[string]struct {
			DeletedCount int64            `json:"deleted_count"`
			Breakdown    map[string]int64 `json:"breakdown"`
		} `json:"succeeded"`
		Failed []struct {
			Deleter string `json:"deleter"`
			Error   string `json:"error"`
		} `json:"failed"`
		Verification map[string]struct {
			Count     int64            `json:"count"`
			Breakdown map[string]int64 `json:"breakdown"`
			Method    string           `json:"method"`
			Checks    []struct {
				Kind    string `json:"kind"`
				Target  string `json:"target"`
				Checked int64  `json:"checked"`
				Found   int64  `json:"found"`
			} `json:"checks"`
		} `json:"verification"`
	} `json:"report"`
	Deleters []struct {
		Name      string           `json:"name"`
		Breakdown map[string]int64 `json:"breakdown"`
	} `json:"deleters"`
}

func (j apiJob) failed() []string {
	var out []string
	for _, f := range j.Report.Failed {
		out = append(out, f.Deleter)
	}
	sort.Strings(out)
	return out
}

func startErasure(t *testing.T, d *testsvc.Daemon, tenant string) apiJob {
	t.Helper()
	var j apiJob
	apitest.Expect(t, d, 202, &j).RequestDeletion(t.Context(), tenant, nil, adminclient.IdempotencyKey(uuid.NewString()))
	return j
}

// settled waits until the tenant's job finished an attempt: COMPLETED, or
// PARTIAL after at least one attempt.
func settled(t *testing.T, d *testsvc.Daemon, tenant string, within time.Duration) apiJob {
	t.Helper()
	var j apiJob
	testsvc.Eventually(t, within, func() bool {
		var a apitest.Answer
		apitest.Record(d, &a).Deletion(t.Context(), tenant)
		if a.Code != 200 {
			return false
		}
		require.NoError(t, json.Unmarshal(a.Body, &j))
		return j.Status == "COMPLETED" || ((j.Status == "PARTIAL" || j.Status == "BLOCKED") && j.Attempts >= 1)
	}, "job of %q finishes an attempt (is %s)", tenant, j.Status)
	return j
}

func plugins(t *testing.T, d *testsvc.Daemon) map[string]struct{ State, LastError string } {
	var pl struct {
		Plugins []struct {
			Name      string `json:"name"`
			State     string `json:"state"`
			LastError string `json:"last_error"`
		} `json:"plugins"`
	}
	apitest.Expect(t, d, 200, &pl).Plugins(t.Context())
	out := map[string]struct{ State, LastError string }{}
	for _, p := range pl.Plugins {
		out[p.Name] = struct{ State, LastError string }{p.State, p.LastError}
	}
	return out
}

// pluginsSettled waits until no plugin is still starting.
func pluginsSettled(t *testing.T, d *testsvc.Daemon, n int) map[string]struct{ State, LastError string } {
	var pl map[string]struct{ State, LastError string }
	testsvc.Eventually(t, time.Minute, func() bool {
		pl = plugins(t, d)
		if len(pl) != n {
			return false
		}
		for _, p := range pl {
			if p.State == "starting" {
				return false
			}
		}
		return true
	}, "plugins started or failed: %v", pl)
	return pl
}

const deletionTuning = `
[deletion]
concurrency = 4
retry_initial_delay = "300ms"
retry_max_delay = "2s"
poll_interval = "100ms"
lease = "2s"
`

func postgresBlock(name, dsn string, tables ...string) string {
	quoted := make([]string, len(tables))
	for i, t := range tables {
		quoted[i] = fmt.Sprintf("%q", t)
	}
	return fmt.Sprintf(`
[[deleter]]
name = %q
plugin = "postgres"
[deleter.config]
dsn = %q
tables = [%s]
tenant_column = "tenant_id"
batch_size = 7
`, name, dsn, strings.Join(quoted, ", "))
}

func redisBlock(addr string, patterns ...string) string {
	quoted := make([]string, len(patterns))
	for i, p := range patterns {
		quoted[i] = fmt.Sprintf("%q", p)
	}
	return fmt.Sprintf(`
[[deleter]]
name = "redis:sessions"
plugin = "redis"
[deleter.config]
addr = %q
patterns = [%s]
batch_size = 5
`, addr, strings.Join(quoted, ", "))
}

func dynamoBlock(name, table, endpoint string) string {
	return fmt.Sprintf(`
[[deleter]]
name = %q
plugin = "dynamodb"
[deleter.config]
table = %q
partition_key = "tenant_id"
region = "us-east-1"
endpoint = %q
access_key_id = "test"
secret_access_key = "test"
`, name, table, endpoint)
}
