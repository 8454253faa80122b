package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/daemon/wire"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// A failed job, edited and replayed, reaches its own reprocess endpoint
// with the edit and a key of its own, and leaves the job as it was; retried
// after the endpoint came back from a 503, it is resolved and its row
// marked. The other jobs of the table, and the table's rows but the
// resolved one's mark, do not change.
func TestAFailedJobIsReplayedAndRetriedThroughItsEndpoint(t *testing.T) {
	t.Parallel()
	jobs := testsvc.PGDatabase(t)
	pool, err := pgxpool.New(t.Context(), jobs)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(t.Context(), `
		CREATE TABLE failed_jobs (id UUID PRIMARY KEY, bookmark_id UUID, job_type TEXT NOT NULL, error_message TEXT,
			payload JSONB, failed_at TIMESTAMPTZ DEFAULT NOW(), retryable BOOLEAN DEFAULT TRUE, resolved_at TIMESTAMPTZ);
		INSERT INTO failed_jobs (id, bookmark_id, job_type, error_message, payload, retryable) VALUES
			('00000000-0000-4000-8000-000000000001', 'b0000000-0000-4000-8000-000000000001', 'llm_processing',
				'upstream timeout after 30s', '{"bookmark":1,"model":"old"}', true),
			('00000000-0000-4000-8000-000000000002', 'b0000000-0000-4000-8000-000000000002', 'llm_processing',
				'upstream timeout after 30s', '{"bookmark":2}', true),
			('00000000-0000-4000-8000-000000000003', 'b0000000-0000-4000-8000-000000000003', 'thumbnail',
				'invalid image', '{"bookmark":3}', false)`)
	require.NoError(t, err)
	tableSum := func(exceptResolvedOf string) string {
		var sum string
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT md5(string_agg(concat_ws('|', id, bookmark_id, job_type, error_message,
			payload::text, failed_at, retryable, CASE WHEN id::text = $1 THEN NULL ELSE resolved_at END), ',' ORDER BY id)) FROM failed_jobs`,
			exceptResolvedOf).Scan(&sum))
		return sum
	}
	before := tableSum("00000000-0000-4000-8000-000000000001")

	type call struct{ path, key, body string }
	var mu sync.Mutex
	var calls []call
	unavailable := true
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, call{r.URL.Path, r.Header.Get("Idempotency-Key"), string(b)})
		if unavailable && len(calls) > 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(endpoint.Close)
	d := startDLQDaemon(t, "sqlite", retryBlock(false, "1m")+fmt.Sprintf(`
[[dlq_source]]
name = "pgtable:bookmarks"
plugin = "pgtable"
[dlq_source.config]
dsn = %q
where = "retryable"
poll_interval = "100ms"
retry_url = %q
resolved_column = "resolved_at"
`, jobs, endpoint.URL+"/v1/bookmarks/{bookmark_id}/reprocess"))
	stored := waitTotal(t, d, "failed_jobs", 2, time.Minute)
	var job, other messageJSON
	for _, m := range stored.Messages {
		if got := getMessage(t, d, m.ID); strings.Contains(string(got.Payload), `"old"`) {
			job = got
		} else {
			other = got
		}
	}
	require.NotEmpty(t, job.ID, "the job stored: %+v", stored.Messages)
	whole := func(id string) string {
		var a apitest.Answer
		apitest.Record(d, &a).Message(t.Context(), id)
		require.Equal(t, 200, a.Code)
		return string(a.Body)
	}
	otherBefore := whole(other.ID)

	// Edit-and-replay: the edit goes to the job's own endpoint; the job
	// stays as it was.
	var replayed map[string]any
	apitest.Expect(t, d, 200, &replayed).Replay(t.Context(), job.ID, &wire.ReplayRequest{Payload: json.RawMessage(`{"bookmark":1,"model":"new"}`)}, false)
	mu.Lock()
	require.Len(t, calls, 1)
	require.Equal(t, "/v1/bookmarks/b0000000-0000-4000-8000-000000000001/reprocess", calls[0].path)
	require.JSONEq(t, `{"bookmark":1,"model":"new"}`, calls[0].body)
	require.NotEmpty(t, calls[0].key, "an Idempotency-Key")
	mu.Unlock()
	after := getMessage(t, d, job.ID)
	require.Equal(t, "PENDING", after.Status, "a replay does not resolve the stored job")
	require.Equal(t, before, tableSum("00000000-0000-4000-8000-000000000001"))

	// A retry while the endpoint answers 503: failed, retryable, nothing
	// marked. Then it answers: resolved, the row marked.
	var failed apitest.Answer
	apitest.Record(d, &failed).RetryMessage(t.Context(), job.ID)
	require.NotEqual(t, 200, failed.Code, "%s", failed.Body)
	require.Equal(t, "PENDING", getMessage(t, d, job.ID).Status)
	var resolved *time.Time
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT resolved_at FROM failed_jobs WHERE bookmark_id = 'b0000000-0000-4000-8000-000000000001'`).Scan(&resolved))
	require.Nil(t, resolved, "not marked while the endpoint fails")
	mu.Lock()
	unavailable = false
	mu.Unlock()
	var res map[string]any
	apitest.Expect(t, d, 200, &res).RetryMessage(t.Context(), job.ID)
	require.Equal(t, "RESOLVED", getMessage(t, d, job.ID).Status)
	testsvc.Eventually(t, 30*time.Second, func() bool {
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT resolved_at FROM failed_jobs WHERE bookmark_id = 'b0000000-0000-4000-8000-000000000001'`).Scan(&resolved))
		return resolved != nil
	}, "the row marked resolved")
	mu.Lock()
	last := calls[len(calls)-1]
	require.JSONEq(t, `{"bookmark":1,"model":"old"}`, last.body, "a retry sends the job as stored")
	require.NotEqual(t, calls[0].key, last.key, "each attempt its own key")
	mu.Unlock()

	// Nothing else changed: the other job, stored or in the table.
	require.Equal(t, before, tableSum("00000000-0000-4000-8000-000000000001"))
	require.JSONEq(t, otherBefore, whole(other.ID))
}
