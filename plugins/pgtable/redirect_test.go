package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
)

// Found by an outside review. The reprocess endpoint sits behind an auth proxy (oauth2-proxy, an SSO
// gateway) that answers an unauthenticated POST with 302/303 to its login
// page, which answers GET with 200: Go's client followed it (as a GET,
// without the body), the 200 counted as the retry, and the job was deleted.
// A redirect is a permanent failure that names where it pointed.
func TestARedirectedRetryIsNoSuccessAndResolvesNothing(t *testing.T) {
	for _, status := range []int{http.StatusFound, http.StatusSeeOther, http.StatusMovedPermanently} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			dsn, pool := seeded(t)
			ctx := testsvc.Context(t, 2*time.Minute)
			var bm string
			require.NoError(t, pool.QueryRow(ctx, `INSERT INTO bookmarks (url) VALUES ('https://example.com') RETURNING id`).Scan(&bm))
			_, err := pool.Exec(ctx, `INSERT INTO failed_jobs (bookmark_id, job_type, error_message, payload, retryable, failed_at) VALUES
				($1, 'llm_processing', 'LLM timeout after 30s', '{"bookmark_id": 1}', true, '2026-11-29 10:00:00+00')`, bm)
			require.NoError(t, err)
			var mu sync.Mutex
			var seen []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.ReadAll(r.Body)
				mu.Lock()
				seen = append(seen, r.Method+" "+r.URL.Path)
				mu.Unlock()
				if r.URL.Path == "/oauth2/sign_in" {
					_, _ = w.Write([]byte("<html>Sign in</html>"))
					return
				}
				http.Redirect(w, r, "/oauth2/sign_in?rd="+r.URL.Path, status)
			}))
			t.Cleanup(srv.Close)
			s := configured(t, map[string]any{"dsn": dsn, "where": "retryable", "poll_interval": "50ms",
				"on_resolved": "delete", "retry_url": srv.URL + "/v1/bookmarks/{bookmark_id}/reprocess"})
			resp, err := s.Fetch(ctx, &sdk.FetchRequest{Max: 10, Wait: 5 * time.Second})
			require.NoError(t, err)
			require.Len(t, resp.Messages, 1)
			m := resp.Messages[0]
			r, err := s.Republish(ctx, &sdk.RepublishRequest{Messages: []sdk.RepublishMessage{{ID: "d1", Topic: m.Origin.Destination,
				Key: m.Key, Value: m.Value, Headers: append(m.Headers, sdk.Header{Key: []byte("x-dlq-id"), Value: []byte("d1")},
					sdk.Header{Key: []byte("x-dlq-retry-count"), Value: []byte("0")})}}})
			require.NoError(t, err)
			mu.Lock()
			t.Logf("endpoint saw: %v; acked=%v err=%v", seen, r.Results[0].Acked, r.Results[0].Err)
			mu.Unlock()
			var left int
			require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM failed_jobs WHERE id::text = $1`, string(m.Key)).Scan(&left))
			require.Equal(t, 1, left, "the failed job was deleted though it was never reprocessed")
			require.False(t, r.Results[0].Acked, "a %d is no successful retry", status)
			require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(r.Results[0].Err))
			require.ErrorContains(t, r.Results[0].Err, "redirected to /oauth2/sign_in")
			mu.Lock()
			require.Equal(t, []string{"POST /v1/bookmarks/" + bm + "/reprocess"}, seen, "the redirect is not followed")
			mu.Unlock()
		})
	}
}
