package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest"
)

// endpoint is the application's reprocess endpoint: it records what it
// is sent and answers with the statuses it is told to, then 200.
type endpoint struct {
	srv *httptest.Server

	mu       sync.Mutex
	requests []request
	answers  []answer
}

type request struct {
	path, idempotencyKey, contentType string
	body                              []byte
}

type answer struct {
	status     int
	retryAfter string
}

func newEndpoint(t testing.TB) *endpoint {
	e := &endpoint{}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		e.requests = append(e.requests, request{r.URL.Path, r.Header.Get("Idempotency-Key"), r.Header.Get("Content-Type"), body})
		a := answer{status: http.StatusAccepted}
		if len(e.answers) > 0 {
			a, e.answers = e.answers[0], e.answers[1:]
		}
		e.mu.Unlock()
		if a.retryAfter != "" {
			w.Header().Set("Retry-After", a.retryAfter)
		}
		w.WriteHeader(a.status)
		_, _ = w.Write([]byte(http.StatusText(a.status)))
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *endpoint) answer(as ...answer) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.answers = append(e.answers, as...)
}

func (e *endpoint) received(path string) []request {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []request
	for _, r := range e.requests {
		if r.path == path {
			out = append(out, r)
		}
	}
	return out
}

// kitFixture is a failed-jobs table whose columns the kit's headers name
// ("error", "text-key"), with text ids and a text payload (the kit
// compares them byte for byte), and the reprocess endpoint.
type kitFixture struct {
	dsn  string
	pool *pgxpool.Pool
	ep   *endpoint
	n    int
}

func newKitFixture(t testing.TB) *kitFixture {
	dsn := testsvc.PGDatabase(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(context.Background(), `CREATE TABLE failed_jobs (
		id TEXT PRIMARY KEY, bookmark_id TEXT NOT NULL, job_type TEXT NOT NULL, error_message TEXT,
		payload TEXT, failed_at TIMESTAMPTZ NOT NULL, "error" TEXT, "text-key" TEXT)`)
	require.NoError(t, err)
	return &kitFixture{dsn: dsn, pool: pool, ep: newEndpoint(t)}
}

// Config carries a password in the DSN (the test server trusts any), for
// the kit to check it never leaves the plugin.
func (f *kitFixture) Config(t testing.TB) map[string]any {
	u, err := url.Parse(f.dsn)
	require.NoError(t, err)
	u.User = url.UserPassword(u.User.Username(), "kit-secret-pw")
	return map[string]any{"dsn": u.String(), "retry_url": f.ep.srv.URL + "/v1/bookmarks/{bookmark_id}/reprocess", "poll_interval": "50ms"}
}
func (f *kitFixture) DLQTopic() string       { return "failed_jobs" }
func (f *kitFixture) RepublishTopic() string { return f.ep.srv.URL + "/v1/reprocess" }

// HeadersAddedByBroker are the row's columns the kit did not write.
func (f *kitFixture) HeadersAddedByBroker() []string {
	return []string{"id", "bookmark_id", "job_type", "error_message", "failed_at"}
}

func (f *kitFixture) Produce(t testing.TB, msgs []plugintest.Produced) {
	t.Helper()
	for _, m := range msgs {
		cols := map[string]*string{}
		for _, h := range m.Headers {
			v := string(h.Value)
			cols[string(h.Key)] = &v
		}
		f.n++
		_, err := f.pool.Exec(context.Background(), `INSERT INTO failed_jobs (id, bookmark_id, job_type, error_message, payload,
			failed_at, "error", "text-key") VALUES ($1, $2, 'llm_processing', 'boom', $3, $4, $5, $6)`,
			string(m.Key), "bm-"+string(m.Key), string(m.Value), time.Unix(1_800_000_000+int64(f.n), 0), cols["error"], cols["text-key"])
		require.NoError(t, err)
	}
}

// Consume is what the endpoint received at the destination's path.
func (f *kitFixture) Consume(t testing.TB, destination string, n int) []plugintest.Produced {
	t.Helper()
	path := strings.TrimPrefix(destination, f.ep.srv.URL)
	var out []plugintest.Produced
	require.Eventually(t, func() bool { return len(f.ep.received(path)) >= n }, 30*time.Second, 20*time.Millisecond)
	for _, r := range f.ep.received(path)[:n] {
		out = append(out, plugintest.Produced{Value: r.body})
	}
	return out
}

func pluginBinary(t testing.TB) string { return testsvc.Binary(t, "lifecycled-plugin-pgtable") }

func configured(t testing.TB, cfg map[string]any) sdk.DLQSource {
	t.Helper()
	p := plugintest.Launch(t, pluginBinary(t), sdk.KindDLQSource)
	s := p.Source(t)
	_, err := s.Configure(testsvc.Context(t, time.Minute), &sdk.ConfigureRequest{Name: "pgtable:bookmarks", Config: cfg})
	require.NoError(t, err)
	return s
}
