package e2e

import (
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

func httpGet(url string) (int, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// healthz is the status the daemon's liveness (GET /healthz) answers; 0
// when the request got no answer.
func healthz(t *testing.T, d *testsvc.Daemon) int {
	t.Helper()
	var a apitest.Answer
	apitest.Record(d, &a).Healthz(t.Context())
	return a.Code
}

// socketGet sends, over the daemon's socket, a GET that is no call of the
// API (pprof, a route that does not exist), and returns the answer's
// status and body.
func socketGet(t *testing.T, d *testsvc.Daemon, path string, header http.Header) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://localhost"+path, nil)
	require.NoError(t, err)
	for name, vs := range header {
		req.Header[name] = vs
	}
	resp, err := d.HTTP().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, body
}

// doerFunc is a function that answers requests: an adminclient.Doer.
type doerFunc func(*http.Request) (*http.Response, error)

func (f doerFunc) Do(req *http.Request) (*http.Response, error) { return f(req) }

// onMetricsPort sends the admin client's requests to the daemon's loopback
// metrics listener (admin.metrics_listen) at port instead of its socket.
func onMetricsPort(port int) adminclient.Doer {
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	c := &http.Client{Timeout: 10 * time.Second}
	return doerFunc(func(req *http.Request) (*http.Response, error) {
		req.URL.Host, req.Host = addr, addr
		return c.Do(req)
	})
}

// bumpSQLiteSchema pretends a newer lifecycled migrated the database.
func bumpSQLiteSchema(path string, version int) error {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Exec(fmt.Sprintf("UPDATE lifecycled_schema_migrations SET version = %d", version))
	return err
}

// notifyListener plays systemd's notify socket in dir; next waits for a
// message containing want and returns it.
func notifyListener(t *testing.T, dir string) (path string, next func(want string) string) {
	path = filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	msgs := make(chan string, 32)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				close(msgs)
				return
			}
			msgs <- string(buf[:n])
		}
	}()
	return path, func(want string) string {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case m, ok := <-msgs:
				require.True(t, ok)
				if strings.Contains(m, want) {
					return m
				}
			case <-timeout:
				t.Fatalf("no %s notification", want)
			}
		}
	}
}
