package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// Idle clients of the loopback metrics port must never make the admin
// socket unreachable by using up the daemon's file descriptors, and the
// socket itself holds a bounded number of connections.
func TestIdleConnectionsCannotStarveTheAdminSocket(t *testing.T) {
	t.Parallel()
	port := testsvc.FreePort(t)
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Admin: fmt.Sprintf("metrics_listen = \"127.0.0.1:%d\"", port),
		Wrap: []string{"prlimit", "--nofile=64:64", "--"}})
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for i := 0; i < 100; i++ {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 2*time.Second)
		require.NoError(t, err)
		conns = append(conns, c)
	}
	for i := 0; i < 10; i++ {
		c, err := net.DialTimeout("unix", d.Socket, 2*time.Second)
		require.NoError(t, err)
		conns = append(conns, c)
	}
	time.Sleep(500 * time.Millisecond) // let the daemon accept what it will
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dd net.Dialer
		return dd.DialContext(ctx, "unix", d.Socket)
	}}}
	var a apitest.Answer
	api := apitest.RecordThrough(client, &a)
	testsvc.Eventually(t, 10*time.Second, func() bool {
		api.Healthz(t.Context())
		return a.Code == 200
	}, "the admin socket answers while 100 idle clients hold the metrics port and 10 the socket")
	require.NotContains(t, d.Logs(), "too many open files")
}

// Counters that alert rules use exist at 0 for every configured plugin and
// deleter before their first increment.
func TestMetricFamiliesExistBeforeTheirFirstIncrement(t *testing.T) {
	t.Parallel()
	redis := testsvc.Redis(t)
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Extra: fmt.Sprintf(
		"[[deleter]]\nname = \"redis:s\"\nplugin = \"redis\"\n[deleter.config]\naddr = %q\npatterns = [\"s:{tenant}\"]\n", redis.Addr)})
	testsvc.Eventually(t, 30*time.Second, func() bool {
		var a apitest.Answer
		apitest.Record(d, &a).Metrics(t.Context())
		return a.Code == 200 && strings.Contains(string(a.Body), `lifecycled_plugin_restarts_total{plugin="redis:s"} 0`) &&
			strings.Contains(string(a.Body), `lifecycled_deletion_failures_total{deleter="redis:s"} 0`)
	}, "restart and failure counters of redis:s at 0")
}

// A state-store outage is a 503 with a code that says so, and `status`
// says the dead-letter counts are unknown rather than 0.
func TestStateStoreOutageIs503AndStatusSaysUnknown(t *testing.T) {
	t.Parallel()
	state := testsvc.PGDatabase(t)
	u, err := url.Parse(state)
	require.NoError(t, err)
	db := strings.TrimPrefix(u.Path, "/")
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{State: state})
	admin, err := pgx.Connect(testsvc.Context(t, time.Minute), testsvc.PGAdminDSN())
	require.NoError(t, err)
	t.Cleanup(func() { admin.Close(context.Background()) })
	outage := func(on bool) {
		ctx := testsvc.Context(t, time.Minute)
		_, err := admin.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %s ALLOW_CONNECTIONS %v`, db, !on))
		require.NoError(t, err)
		if on {
			_, err = admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, db)
			require.NoError(t, err)
		}
	}
	outage(true)
	t.Cleanup(func() { outage(false) })
	testsvc.Eventually(t, 30*time.Second, func() bool {
		var a apitest.Answer
		apitest.Record(d, &a).Topics(t.Context())
		return a.Code == 503 && strings.Contains(string(a.Body), "SYS_STATE_STORE_UNAVAILABLE") && !strings.Contains(string(a.Body), db)
	}, "503 SYS_STATE_STORE_UNAVAILABLE without the database's name")
	out, _, code := d.CLI("status")
	require.Equal(t, 3, code, out)
	require.Contains(t, out, "dead letters  unknown")
	require.NotContains(t, out, "PENDING 0")
	outage(false)
	testsvc.Eventually(t, 30*time.Second, func() bool {
		var a apitest.Answer
		apitest.Record(d, &a).Topics(t.Context())
		return a.Code == 200
	}, "back after the outage")
}

// Issue 33 case 7: /readyz?verbose on the loopback metrics port, which asks
// for no credentials, showed each failing plugin's whole error: database
// hosts, users and names. The TCP port says which check fails; the admin
// socket keeps the detail.
func TestReadinessOnTheMetricsPortNamesNoConnectionDetails(t *testing.T) {
	t.Parallel()
	port, closed := testsvc.FreePort(t), testsvc.FreePort(t)
	dsn := fmt.Sprintf("postgres://secretuser@127.0.0.1:%d/secretdb?sslmode=disable&connect_timeout=1", closed)
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Admin: fmt.Sprintf("metrics_listen = \"127.0.0.1:%d\"", port),
		Extra: fmt.Sprintf("[[deleter]]\nname = \"postgres:app\"\nplugin = \"postgres\"\n[deleter.config]\ndsn = %q\ntables = [\"notes\"]\n", dsn)})
	var socketBody string
	testsvc.Eventually(t, 30*time.Second, func() bool {
		var a apitest.Answer
		apitest.Record(d, &a).Readyz(t.Context(), true)
		socketBody = string(a.Body)
		return a.Code == 503 && strings.Contains(socketBody, "postgres:app")
	}, "the plugin's check fails")
	require.Contains(t, socketBody, "secretdb", "the admin socket keeps the detail")

	var a apitest.Answer
	apitest.RecordThrough(onMetricsPort(port), &a).Readyz(t.Context(), true)
	require.NotZero(t, a.Code, "%s", a.Body)
	body := a.Body
	require.Equal(t, 503, a.Code)
	require.Contains(t, string(body), "postgres:app", "which check fails")
	for _, secret := range []string{"secretdb", "secretuser", fmt.Sprint(closed)} {
		require.NotContains(t, string(body), secret, "the metrics port gives no connection details")
	}
}
