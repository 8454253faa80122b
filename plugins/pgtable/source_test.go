package main

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	f := newKitFixture(t)
	url := f.ep.srv.URL + "/v1/bookmarks/{bookmark_id}/reprocess"
	plugintest.RunDLQSource(t, plugintest.SourceOptions{
		Binary:             pluginBinary(t),
		Fixture:            f,
		TextHeaders:        true,
		RepublishValueOnly: true,
		BadConfigs: map[string]map[string]any{
			"no dsn":          {"retry_url": url},
			"no table":        {"dsn": f.dsn, "table": "no_such_table", "retry_url": url},
			"no such column":  {"dsn": f.dsn, "payload_column": "body", "retry_url": url},
			"bad where":       {"dsn": f.dsn, "where": "retryable AND", "retry_url": url},
			"no retry":        {"dsn": f.dsn},
			"both retries":    {"dsn": f.dsn, "retry_url": url, "retry_table": "jobs"},
			"placeholder":     {"dsn": f.dsn, "retry_url": f.ep.srv.URL + "/v1/{no_such_column}"},
			"bad on_resolved": {"dsn": f.dsn, "retry_url": url, "on_resolved": "archive"},
			"not http":        {"dsn": f.dsn, "retry_url": "ftp://x/{id}"},
			"unknown key":     {"dsn": f.dsn, "retry_url": url, "tables": "x"},
		},
	})
}

// seedSchema is the source design's failed_jobs, with the bookmarks its
// rows reference.
const seedSchema = `
	CREATE TABLE bookmarks (id UUID PRIMARY KEY DEFAULT gen_random_uuid(), url TEXT NOT NULL);
	CREATE TABLE failed_jobs (
		id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
		bookmark_id UUID REFERENCES bookmarks(id),
		job_type TEXT NOT NULL,
		error_message TEXT,
		payload JSONB,
		failed_at TIMESTAMPTZ DEFAULT NOW(),
		retryable BOOLEAN DEFAULT TRUE
	);`

func seeded(t *testing.T) (string, *pgxpool.Pool) {
	t.Helper()
	dsn := testsvc.PGDatabase(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(context.Background(), seedSchema)
	require.NoError(t, err)
	return dsn, pool
}

func checksum(t *testing.T, pool *pgxpool.Pool, where string) string {
	t.Helper()
	var sum string
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT COALESCE(md5(string_agg(f::text, ',' ORDER BY id)), '') FROM failed_jobs f WHERE `+where).Scan(&sum))
	return sum
}

// The source design's table as it is: retryable rows only, the reprocess
// endpoint of the row's bookmark, the design's retry rules (5xx, 408 and
// 429 with Retry-After retryable; other 4xx permanent), one
// Idempotency-Key per attempt, the row marked resolved once a retry
// succeeded and never deleted; the other rows untouched.
func TestTheSeedsFailedJobsRetryThroughTheReprocessEndpoint(t *testing.T) {
	t.Parallel()
	dsn, pool := seeded(t)
	ctx := testsvc.Context(t, 2*time.Minute)
	var bm string
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO bookmarks (url) VALUES ('https://example.com') RETURNING id`).Scan(&bm))
	_, err := pool.Exec(ctx, `INSERT INTO failed_jobs (bookmark_id, job_type, error_message, payload, retryable, failed_at) VALUES
		($1, 'llm_processing', 'LLM timeout after 30s', '{"bookmark_id": 1, "attempt": 3}', true, '2026-11-29 10:00:00+00'),
		($1, 'extraction', 'page not found', '{"x": 1}', false, '2026-11-29 10:00:01+00')`, bm)
	require.NoError(t, err)
	ep := newEndpoint(t)
	s := configured(t, map[string]any{"dsn": dsn, "where": "retryable", "poll_interval": "50ms", "resolved_column": "",
		"retry_url": ep.srv.URL + "/v1/bookmarks/{bookmark_id}/reprocess"})
	others := checksum(t, pool, "NOT retryable")

	resp, err := s.Fetch(ctx, &sdk.FetchRequest{Max: 10, Wait: 5 * time.Second})
	require.NoError(t, err)
	require.Len(t, resp.Messages, 1, "the retryable row alone")
	m := resp.Messages[0]
	require.Equal(t, "failed_jobs", m.Position.Topic)
	require.JSONEq(t, `{"bookmark_id": 1, "attempt": 3}`, string(m.Value))
	require.Equal(t, sdk.Origin{Destination: ep.srv.URL + "/v1/bookmarks/{bookmark_id}/reprocess", DestinationFrom: "retry_url",
		DestinationConfigured: true, ErrorMessage: "LLM timeout after 30s", ErrorClass: "llm_processing",
		FirstFailedAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}, withUTC(m.Origin))
	_, err = s.Commit(ctx, &sdk.CommitRequest{Positions: []sdk.Position{m.Position}})
	require.NoError(t, err)

	republish := func(attempt string) sdk.RepublishResult {
		r, err := s.Republish(ctx, &sdk.RepublishRequest{Messages: []sdk.RepublishMessage{{ID: "d1", Topic: m.Origin.Destination,
			Key: m.Key, Value: m.Value, Headers: append(m.Headers, sdk.Header{Key: []byte("x-dlq-id"), Value: []byte("d1")},
				sdk.Header{Key: []byte("x-dlq-retry-count"), Value: []byte(attempt)})}}})
		require.NoError(t, err)
		return r.Results[0]
	}
	ep.answer(answer{status: 503, retryAfter: "7"}, answer{status: 429, retryAfter: "2"}, answer{status: 408}, answer{status: 400})
	for i, want := range []time.Duration{7 * time.Second, 2 * time.Second, 0} {
		r := republish(string(rune('1' + i)))
		require.False(t, r.Acked)
		require.Equal(t, sdk.ClassRetryable, sdk.ClassOf(r.Err), "%v", r.Err)
		require.Equal(t, want, sdk.RetryAfterOf(r.Err))
	}
	r := republish("4")
	require.False(t, r.Acked)
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(r.Err), "400: %v", r.Err)
	var resolved *time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT resolved_at FROM lifecycled_dlq_rows WHERE row_id = $1`, string(m.Key)).Scan(&resolved))
	require.Nil(t, resolved, "not resolved by a failed retry")

	require.True(t, republish("5").Acked)
	got := ep.received("/v1/bookmarks/" + bm + "/reprocess")
	require.Len(t, got, 5)
	for i, req := range got {
		require.Equal(t, "d1-"+string(rune('1'+i)), req.idempotencyKey, "one key per attempt")
		require.Equal(t, "application/json", req.contentType)
		require.JSONEq(t, `{"bookmark_id": 1, "attempt": 3}`, string(req.body))
	}
	require.NoError(t, pool.QueryRow(ctx, `SELECT resolved_at FROM lifecycled_dlq_rows WHERE row_id = $1`, string(m.Key)).Scan(&resolved))
	require.NotNil(t, resolved, "resolved")
	var rows int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM failed_jobs`).Scan(&rows))
	require.Equal(t, 2, rows, "never deleted unless the config says so")
	require.Equal(t, others, checksum(t, pool, "NOT retryable"), "the other rows untouched")

	// A replay to another host is refused: the daemon is no proxy.
	far, err := s.Republish(ctx, &sdk.RepublishRequest{Messages: []sdk.RepublishMessage{{ID: "x", Topic: "http://169.254.169.254/latest/meta-data", Value: []byte("{}")}}})
	require.NoError(t, err)
	require.False(t, far.Results[0].Acked)
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(far.Results[0].Err))
}

// Retries into a queue table; with on_resolved = "delete" the row goes
// once its retry succeeded, and only it.
func TestRetryIntoAQueueTableAndDeleteWhenResolved(t *testing.T) {
	t.Parallel()
	dsn, pool := seeded(t)
	ctx := testsvc.Context(t, 2*time.Minute)
	_, err := pool.Exec(ctx, `CREATE TABLE jobs (id BIGSERIAL PRIMARY KEY, payload JSONB NOT NULL);
		INSERT INTO failed_jobs (job_type, error_message, payload, failed_at) VALUES
			('extraction', 'boom', '{"n": 1}', '2026-11-29 10:00:00+00'), ('extraction', 'boom', '{"n": 2}', '2026-11-29 10:00:01+00')`)
	require.NoError(t, err)
	s := configured(t, map[string]any{"dsn": dsn, "retry_table": "jobs", "on_resolved": "delete", "poll_interval": "50ms"})
	resp, err := s.Fetch(ctx, &sdk.FetchRequest{Max: 10, Wait: 5 * time.Second})
	require.NoError(t, err)
	require.Len(t, resp.Messages, 2)
	m := resp.Messages[0]
	require.Equal(t, "table:jobs", m.Origin.Destination)
	other := checksum(t, pool, "id::text <> '"+string(m.Key)+"'")
	var left int
	// A replay (an edited copy) is queued and resolves nothing: with
	// on_resolved = "delete" it once deleted the job.
	r, err := s.Republish(ctx, &sdk.RepublishRequest{Messages: []sdk.RepublishMessage{{ID: "r", Topic: m.Origin.Destination, Key: m.Key,
		Value: []byte(`{"n": 1, "edited": true}`), Headers: []sdk.Header{{Key: []byte("x-dlq-replay-of"), Value: []byte("d")},
			{Key: []byte("x-dlq-replay-id"), Value: []byte("r")}}}}})
	require.NoError(t, err)
	require.True(t, r.Results[0].Acked, "%v", r.Results[0].Err)
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM failed_jobs WHERE id::text = $1`, string(m.Key)).Scan(&left))
	require.Equal(t, 1, left, "a replay does not resolve the job")
	_, err = pool.Exec(ctx, `DELETE FROM jobs`)
	require.NoError(t, err)

	r, err = s.Republish(ctx, &sdk.RepublishRequest{Messages: []sdk.RepublishMessage{{ID: "d", Topic: m.Origin.Destination, Key: m.Key, Value: m.Value}}})
	require.NoError(t, err)
	require.True(t, r.Results[0].Acked, "%v", r.Results[0].Err)
	var queued string
	require.NoError(t, pool.QueryRow(ctx, `SELECT payload::text FROM jobs`).Scan(&queued))
	require.JSONEq(t, `{"n": 1}`, queued)
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM failed_jobs WHERE id::text = $1`, string(m.Key)).Scan(&left))
	require.Zero(t, left, "deleted once resolved")
	require.Equal(t, other, checksum(t, pool, "id::text <> '"+string(m.Key)+"'"), "the other row untouched")
}

func withUTC(o sdk.Origin) sdk.Origin {
	o.FirstFailedAt = o.FirstFailedAt.UTC()
	return o
}
