package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// TestErasureReceiptVerifiesOfflineAndCatchesTampering: a tenant erased
// from PostgreSQL, Redis and DynamoDB gets a signed receipt that names the
// plugins that ran; `lifecycled receipt verify` accepts it with the daemon
// stopped and the public key in a file, and refuses it with a count or the
// tenant id changed, with another key, and cut short.
func TestErasureReceiptVerifiesOfflineAndCatchesTampering(t *testing.T) {
	t.Parallel()
	for name, state := range stateStores(t) {
		t.Run(name, func(t *testing.T) {
			s := newStores(t, false)
			a := uuid.NewString()
			seedA := s.seed(t, a, 120)
			d := testsvc.StartDaemon(t, testsvc.DaemonOptions{State: state(), Extra: s.deleters()})
			testsvc.Eventually(t, time.Minute, apitest.Ready(d), "plugins ready")
			code, body := apitest.Refused(apitest.Client(d).Receipt(t.Context(), a))(t)
			require.Equal(t, 404, code, "%s", body)

			startDeletion(t, d, a)
			waitJob(t, d, a, "COMPLETED", 2*time.Minute)
			dir := t.TempDir()
			rec, pub := filepath.Join(dir, "receipt.json"), filepath.Join(dir, "pub.pem")
			out, errOut, code := d.CLI("tenant", "receipt", a, "-o", rec)
			require.Equal(t, 0, code, "%s\n%s", out, errOut)
			_, errOut, code = d.CLI("receipt", "key", "-o", pub)
			require.Equal(t, 0, code, errOut)

			raw, err := os.ReadFile(rec)
			require.NoError(t, err)
			var doc struct {
				TenantID     string `json:"tenant_id"`
				DeletedTotal int64  `json:"deleted_total"`
				Deleters     []struct {
					Name          string `json:"name"`
					Plugin        string `json:"plugin"`
					PluginVersion string `json:"plugin_version"`
					PluginSHA256  string `json:"plugin_sha256"`
					ConfigSHA256  string `json:"config_sha256"`
					DeletedCount  int64  `json:"deleted_count"`
				} `json:"deleters"`
			}
			require.NoError(t, json.Unmarshal(raw, &doc), "the fields read as they are")
			require.Equal(t, a, doc.TenantID)
			require.Equal(t, seedA.pg+seedA.redis+seedA.dynamo, doc.DeletedTotal)
			var plugins struct {
				Plugins []struct{ Name, Version, SHA256 string } `json:"plugins"`
			}
			apitest.Expect(t, d, 200, &plugins).Plugins(t.Context())
			require.Len(t, doc.Deleters, 3)
			for _, dl := range doc.Deleters {
				for _, p := range plugins.Plugins {
					if p.Name == dl.Name {
						require.Equal(t, p.SHA256, dl.PluginSHA256, dl.Name)
						require.Equal(t, p.Version, dl.PluginVersion, dl.Name)
					}
				}
				require.Regexp(t, `^[0-9a-f]{64}$`, dl.PluginSHA256)
				require.Regexp(t, `^sha256:[0-9a-f]{64}$`, dl.ConfigSHA256)
			}
			require.NotContains(t, string(raw), "secret_access_key", "no config, let alone a secret, in the receipt")

			out, errOut, code = d.CLI("receipt", "verify", rec)
			require.Equal(t, 0, code, "asking the daemon for the key: %s\n%s", out, errOut)
			require.Contains(t, out, "VALID")

			// Offline: the daemon is gone, the key is a file.
			d.Signal(syscall.SIGTERM)
			require.Equal(t, 0, d.Wait(30*time.Second))
			verify := func(file string, args ...string) (string, int) {
				out, errOut, code := d.CLI(append([]string{"receipt", "verify", file}, args...)...)
				return out + errOut, code
			}
			out, code = verify(rec, "--key", pub)
			require.Equal(t, 0, code, out)
			for _, check := range []string{"ok    json", "ok    form", "ok    key", "ok    signature", "ok    content", "ok    layout", "VALID: tenant " + a} {
				require.Contains(t, out, check, "says what it checked")
			}

			write := func(name string, data []byte) string {
				p := filepath.Join(dir, name)
				require.NoError(t, os.WriteFile(p, data, 0o600))
				return p
			}
			countRE := regexp.MustCompile(`"deleted_count":(\d+)`)
			m := countRE.FindSubmatchIndex(raw)
			require.NotNil(t, m)
			changedCount := append(append(append([]byte{}, raw[:m[2]]...), []byte("999999")...), raw[m[3]:]...)
			otherTenant := bytes.Replace(raw, []byte(a), []byte(uuid.NewString()), 1)
			keygenOut, errOut, code := d.CLI("receipt", "keygen", filepath.Join(dir, "other.key"))
			require.Equal(t, 0, code, errOut)
			wrongKey := write("wrong.pem", []byte(keygenOut[strings.Index(keygenOut, "-----BEGIN"):]))
			for name, tc := range map[string]struct {
				file, key, want string
			}{
				"changed count":     {write("count.json", changedCount), pub, "FAIL  signature"},
				"changed tenant id": {write("tenant.json", otherTenant), pub, "FAIL  signature"},
				"wrong key":         {rec, wrongKey, "FAIL  key"},
				"truncated":         {write("cut.json", raw[:len(raw)*2/3]), pub, "FAIL  json"},
			} {
				out, code := verify(tc.file, "--key", tc.key)
				require.Equal(t, 4, code, "%s: %s", name, out)
				require.Contains(t, out, tc.want, name)
				require.Contains(t, out, "INVALID", name)
			}
			out, code = verify(rec)
			require.Equal(t, 1, code, "no daemon to ask and no --key: the check could not be made: %s", out)
		})
	}
}
