package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// The CLI's answers that scripts rely on: an incomplete count, an unknown
// topic and a partial replay are not exit 0; --format json errors are on
// stdout with the request id; --addr takes a bare socket path.
func TestCLIExitCodesAndJSONErrors(t *testing.T) {
	t.Parallel()
	port := testsvc.FreePort(t) // nothing listens: the redis deleter cannot start
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Extra: fmt.Sprintf(
		"[[deleter]]\nname = \"redis:sessions\"\nplugin = \"redis\"\n[deleter.config]\naddr = \"127.0.0.1:%d\"\npatterns = [\"s:{tenant}:*\"]\n", port)})
	pluginsSettled(t, d, 1)
	const tenant = "550e8400-e29b-41d4-a716-446655440000"

	t.Run("tenant count with a deleter that cannot count", func(t *testing.T) {
		out, errOut, code := d.CLI("tenant", "count", tenant)
		require.Equal(t, 3, code, "%s\n%s", out, errOut)
		require.Contains(t, errOut, "incomplete: 1 deleter could not count")
		out, _, code = d.CLI("--format", "json", "tenant", "count", tenant)
		require.Equal(t, 3, code)
		var body struct {
			Complete *bool `json:"complete"`
			Failed   []any `json:"failed"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &body), out)
		require.NotNil(t, body.Complete)
		require.False(t, *body.Complete)
		require.Len(t, body.Failed, 1)
	})

	t.Run("dlq list of a topic nothing was stored for", func(t *testing.T) {
		_, errOut, code := d.CLI("dlq", "list", "nosuch.dlq.v1")
		require.Equal(t, 3, code)
		require.Contains(t, errOut, "no dead letter is stored for topic nosuch.dlq.v1")
	})

	t.Run("--format json prints the error envelope on stdout", func(t *testing.T) {
		out, errOut, code := d.CLI("--format", "json", "tenant", "count", "not-a-uuid")
		require.Equal(t, 2, code, errOut)
		var env envelope
		require.NoError(t, json.Unmarshal([]byte(out), &env), "stdout: %q", out)
		require.Equal(t, "SYS_TENANT_VALIDATION_ERROR", env.Error.Code)
		require.True(t, strings.HasPrefix(env.Error.RequestID, "req_"), env.Error.RequestID)

		cmd := exec.Command(filepath.Join(d.Bin, "lifecycled"), "--format", "json", "--addr", filepath.Join(d.Dir, "nobody.sock"), "status")
		stdout, _ := cmd.Output()
		require.NoError(t, json.Unmarshal(stdout, &env), "a local error is an envelope too: %q", stdout)
		require.Equal(t, "CLI_LOCAL_ERROR", env.Error.Code)
	})

	t.Run("--addr takes a bare socket path", func(t *testing.T) {
		cmd := exec.Command(filepath.Join(d.Bin, "lifecycled"), "--addr", d.Socket, "dlq", "topics")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
	})

	t.Run("retry-all takes dry_run in the body and refuses anything else", func(t *testing.T) {
		var a apitest.Answer
		api := apitest.Record(d, &a)
		api.RetryAll(t.Context(), "orders.dlq.v1", false, adminclient.Body([]byte(`{"dry_run":true}`)))
		require.Equal(t, 200, a.Code, "%s", a.Body)
		require.Contains(t, string(a.Body), `"dry_run":true`)
		api.RetryAll(t.Context(), "orders.dlq.v1", false, adminclient.Body([]byte(`{"dry_rnu":true}`)))
		require.Equal(t, 400, a.Code, "%s", a.Body)
		require.Contains(t, string(a.Body), "dry_rnu")
		api.RetryAll(t.Context(), "orders.dlq.v1", false, adminclient.Query(url.Values{"dry_run": {"false"}}), adminclient.Body([]byte(`{"dry_run":true}`)))
		require.Equal(t, 400, a.Code, "query and body disagree")
	})
}

// `tenant count` on a daemon without any deleter counted nothing: a total
// of 0 there is no answer, so it exits 3 and says why (it exited 0).
func TestTenantCountWithoutDeletersIsNoAnswer(t *testing.T) {
	t.Parallel()
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{})
	out, errOut, code := d.CLI("tenant", "count", "550e8400-e29b-41d4-a716-446655440000")
	require.Equal(t, 3, code, "%s %s", out, errOut)
	require.Contains(t, errOut, "no deleter is configured: nothing was counted")
	_, _, code = d.CLI("--format", "json", "tenant", "count", "550e8400-e29b-41d4-a716-446655440000")
	require.Equal(t, 3, code)
}
