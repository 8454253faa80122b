package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/lifecycled/lifecycled/daemon/wire"
	"github.com/stretchr/testify/require"
)

func TestPrintCountsShowsTheBreakdownUnderEachDeleter(t *testing.T) {
	tests := map[string]struct {
		body string
		want string
	}{
		"complete": {
			body: `{"tenant_id":"44444444-dddd-4ddd-8ddd-444444444444",
				"counts":{"redis:sessions":5,"postgres:workflows":84},
				"breakdown":{"redis:sessions":{"session:{tenant}:*":3,"csrf:{tenant}:*":2},
					"postgres:workflows":{"public.workflow_steps":40,"public.workflow_instances":40,"public.workflow_definitions":4}},
				"total":89,"complete":true,"failed":[]}`,
			want: `tenant  44444444-dddd-4ddd-8ddd-444444444444

DELETER                        ITEMS
postgres:workflows             84
  public.workflow_definitions  4
  public.workflow_instances    40
  public.workflow_steps        40
redis:sessions                 5
  csrf:{tenant}:*              2
  session:{tenant}:*           3
total                          89
`,
		},
		"a deleter could not count": {
			body: `{"tenant_id":"44444444-dddd-4ddd-8ddd-444444444444",
				"counts":{"postgres:workflows":4},"breakdown":{"postgres:workflows":{"public.t":4}},
				"total":4,"complete":false,"failed":[{"deleter":"redis:sessions","error":"dial tcp: connection refused"}]}`,
			want: `tenant  44444444-dddd-4ddd-8ddd-444444444444

DELETER             ITEMS
postgres:workflows  4
  public.t          4
redis:sessions      FAILED (below)
total               4 or more: 1 deleter could not count

redis:sessions failed:
  dial tcp: connection refused
`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var body wire.Counts
			require.NoError(t, json.Unmarshal([]byte(tc.body), &body))
			var out bytes.Buffer
			printCounts(&globals{stdout: &out, format: "table"}, &body)
			require.Equal(t, tc.want, out.String())
		})
	}
}

func TestPrintJobShowsBreakdownAndVerification(t *testing.T) {
	raw := `{"id":"0195","tenant_id":"44444444-dddd-4ddd-8ddd-444444444444","status":"COMPLETED","attempts":2,
		"created_at":"2026-11-01T12:00:00.000+00:00","updated_at":"2026-11-01T12:00:05.000+00:00",
		"finished_at":"2026-11-01T12:00:05.000+00:00","next_attempt_at":null,"verified":true,
		"on_hold":false,"not_before":null,"started_at":null,"plan_hash":null,"approval_required":false,
		"report":{"succeeded":{"postgres:app":{"deleted_count":12,"breakdown":{"public.steps":8,"public.instances":4}}},"failed":[],
			"verification":{"postgres:app":{"count":0,"breakdown":{"public.steps":0,"public.instances":0}}}},
		"deleters":[{"name":"postgres:app","status":"SUCCEEDED","deleted_count":12,"total":12,
			"breakdown":{"public.steps":8,"public.instances":4},"attempts":2,"updated_at":"2026-11-01T12:00:05.000+00:00"}]}`
	var job wire.Job
	require.NoError(t, json.Unmarshal([]byte(raw), &job))
	var out bytes.Buffer
	printJob(&globals{stdout: &out, format: "table"}, &job)
	got := out.String()
	want := `DELETER             STATUS     DELETED  TOTAL  ATTEMPTS  ERROR
postgres:app        SUCCEEDED  12       12     2
  public.instances             4
  public.steps                 8

VERIFIED            METHOD  LEFT
postgres:app        count   0
  public.instances          0
  public.steps              0
`
	require.True(t, strings.HasSuffix(got, want), "got:\n%s", got)
	require.Contains(t, got, "verified  true")

	// --format json prints the job as the API has it, breakdowns included.
	out.Reset()
	printJob(&globals{stdout: &out, format: "json"}, &job)
	var back, orig map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &back))
	require.NoError(t, json.Unmarshal([]byte(raw), &orig))
	require.Equal(t, orig, back)
}

// The deleters table stays one table with each deleter's breakdown under
// it: the sub-rows carry every column, so the columns after DELETED line
// up for every deleter (a sub-row with fewer cells used to cut the
// columns into blocks aligned each on its own).
func TestPrintJobKeepsColumnsAlignedAcrossSubRows(t *testing.T) {
	raw := `{"id":"0195","tenant_id":"t","status":"PARTIAL","attempts":2,"created_at":"c","updated_at":"u","verified":false,
		"report":{"succeeded":{},"failed":[]},
		"deleters":[{"name":"postgres:app","status":"SUCCEEDED","deleted_count":12,"total":12,
			"breakdown":{"public.steps":8,"public.instances":4},"attempts":2,"updated_at":"u"},
			{"name":"redis:sessions","status":"FAILED","deleted_count":1234567,"total":2345678,
			"breakdown":{"session:{tenant}:*":1234567},"attempts":11,"error":"dial tcp: connection refused","updated_at":"u"}]}`
	var job wire.Job
	require.NoError(t, json.Unmarshal([]byte(raw), &job))
	var out bytes.Buffer
	printJob(&globals{stdout: &out, format: "table"}, &job)
	var header string
	rows := map[string]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		switch {
		case strings.HasPrefix(line, "DELETER"):
			header = line
		case strings.HasPrefix(line, "postgres:app"), strings.HasPrefix(line, "redis:sessions"):
			rows[strings.Fields(line)[0]] = line
		}
	}
	require.NotEmpty(t, header, out.String())
	for _, col := range []struct{ name, pg, redis string }{{"TOTAL", "12", "2345678"}, {"ATTEMPTS", "2", "11"}, {"ERROR", "", "dial tcp"}} {
		at := strings.Index(header, col.name)
		if col.pg != "" {
			require.Equal(t, col.pg, strings.Fields(rows["postgres:app"][at:])[0], "%s of postgres:app under its header\n%s", col.name, out.String())
		}
		require.True(t, strings.HasPrefix(rows["redis:sessions"][at:], col.redis), "%s of redis:sessions under its header\n%s", col.name, out.String())
	}
}
