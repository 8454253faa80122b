package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// pgTool finds a PostgreSQL client program of the server's major version
// (pg_dump refuses a newer server), else the one on PATH.
func pgTool(t *testing.T, name string) string {
	t.Helper()
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(dirs) > 0 {
		return dirs[len(dirs)-1]
	}
	p, err := exec.LookPath(name)
	require.NoError(t, err, "%s is needed (Debian package postgresql-client)", name)
	return p
}

func runTool(t *testing.T, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, pgTool(t, name), args...).CombinedOutput()
	require.NoError(t, err, "%s: %s", name, out)
}

type resurrectionBody struct {
	ErasureJobID  string           `json:"erasure_job_id"`
	ReceiptSHA256 string           `json:"receipt_sha256"`
	Counts        map[string]int64 `json:"counts"`
	SeenCount     int              `json:"seen_count"`
	ResolvedAt    *string          `json:"resolved_at"`
	Action        string           `json:"action"`
	ReeraseJobID  *string          `json:"reerase_job_id"`
}

func resurrections(t *testing.T, d *testsvc.Daemon, tenant string) []resurrectionBody {
	t.Helper()
	var body struct {
		Jobs          []json.RawMessage  `json:"jobs"`
		Resurrections []resurrectionBody `json:"resurrections"`
	}
	apitest.Expect(t, d, 200, &body).TenantDeletions(t.Context(), tenant, nil)
	require.NotNil(t, body.Resurrections, "the field is always there")
	return body.Resurrections
}

var resurrectionsMetric = regexp.MustCompile(`(?m)^lifecycled_erasure_resurrections_total\{deleter="postgres:workflows"\} (\d+)$`)

func resurrectionCount(t *testing.T, d *testsvc.Daemon) string {
	t.Helper()
	m := resurrectionsMetric.FindStringSubmatch(metrics(t, d))
	require.NotNil(t, m, "the series exists from the start")
	return m[1]
}

// TestRestoreDrill is the restore drill of docs/runbooks/restore-drill.md against a
// real PostgreSQL deleter store, on both state stores: a pg_dump taken
// before tenant A's erasure is restored after it; re-verification finds A
// (resurrection shown on the tenant, metric incremented once) and, with
// reerase enabled by a reload, erases it again with a job whose receipt
// names the first receipt's hash. Tenant B, in the same tables, is byte
// for byte the same at every step. The signed ledger exports, verifies,
// fails verification and import when tampered (changing nothing), and
// imports idempotently.
func TestRestoreDrill(t *testing.T) {
	t.Parallel()
	for name, state := range stateStores(t) {
		t.Run(name, func(t *testing.T) {
			s := newPGStore(t)
			a, b := uuid.NewString(), uuid.NewString()
			s.seed(t, a, 40)
			s.seed(t, b, 30)
			sumB := s.pgChecksum(t, b)
			leftA := s.pgLeft(t, a)
			dir := t.TempDir()
			dump := filepath.Join(dir, "app.dump")
			runTool(t, "pg_dump", "--format=custom", "--file", dump, "--dbname", s.pgDSN)

			d := testsvc.StartDaemon(t, testsvc.DaemonOptions{State: state(), Extra: s.pgOnly(`
reverify_interval = "1s"
reverify_rate = 50.0
reerase = false`)})
			testsvc.Eventually(t, time.Minute, apitest.Ready(d), "plugins ready")
			startDeletion(t, d, a)
			first := waitJob(t, d, a, "COMPLETED", 2*time.Minute)
			require.Zero(t, total(s.pgLeft(t, a)))
			require.Equal(t, sumB, s.pgChecksum(t, b))
			rec, _ := apitest.Expect(t, d, 200, nil).Receipt(t.Context(), a)
			sum := sha256.Sum256(bytes.TrimSuffix(rec, []byte("\n")))
			firstHash := "sha256:" + hex.EncodeToString(sum[:])

			// The ledger: export, verify, tamper, import.
			ledgerFile, pub := filepath.Join(dir, "ledger.json"), filepath.Join(dir, "pub.pem")
			out, errOut, code := d.CLI("ledger", "export", "--out", ledgerFile)
			require.Equal(t, 0, code, "%s\n%s", out, errOut)
			raw, err := os.ReadFile(ledgerFile)
			require.NoError(t, err)
			require.Contains(t, string(raw), `"job_id":"`+first.ID+`"`)
			require.Contains(t, string(raw), `"receipt_sha256":"`+firstHash+`"`)
			_, errOut, code = d.CLI("receipt", "key", "-o", pub)
			require.Equal(t, 0, code, errOut)
			out, errOut, code = d.CLI("ledger", "verify", ledgerFile, "--key", pub)
			require.Equal(t, 0, code, "%s\n%s", out, errOut)
			require.Contains(t, out, "VALID: 1 erasures")
			tampered := filepath.Join(dir, "tampered.json")
			require.NoError(t, os.WriteFile(tampered, bytes.Replace(raw, []byte(a), []byte(uuid.NewString()), 1), 0o600))
			out, _, code = d.CLI("ledger", "verify", tampered, "--key", pub)
			require.Equal(t, 4, code, out)
			require.Contains(t, out, "FAIL  signature")
			_, errOut, code = d.CLI("ledger", "import", tampered)
			require.Equal(t, 2, code, errOut)
			require.Contains(t, errOut, "SYS_LEDGER_INVALID")
			out, errOut, code = d.CLI("ledger", "import", ledgerFile)
			require.Equal(t, 0, code, "%s\n%s", out, errOut)
			require.Contains(t, out, "1 entries, 0 added, 1 already in the ledger")

			testsvc.Eventually(t, time.Minute, func() bool {
				return strings.Contains(metrics(t, d), `lifecycled_erasure_reverified_tenants_total{result="clean"} `) &&
					!strings.Contains(metrics(t, d), `lifecycled_erasure_reverified_tenants_total{result="clean"} 0`)
			}, "a pass found A clean")
			require.Equal(t, "0", resurrectionCount(t, d))
			require.Empty(t, resurrections(t, d, a))

			// The restore.
			runTool(t, "pg_restore", "--clean", "--if-exists", "--single-transaction", "--dbname", s.pgDSN, dump)
			require.Equal(t, leftA, s.pgLeft(t, a), "A is back")
			require.Equal(t, sumB, s.pgChecksum(t, b))

			var found []resurrectionBody
			testsvc.Eventually(t, time.Minute, func() bool {
				found = resurrections(t, d, a)
				return len(found) == 1
			}, "re-verification finds A")
			require.Equal(t, "REPORTED", found[0].Action, "reerase is off")
			require.Equal(t, first.ID, found[0].ErasureJobID)
			require.Equal(t, firstHash, found[0].ReceiptSHA256)
			require.Equal(t, map[string]int64{"postgres:workflows": total(leftA)}, found[0].Counts)
			require.Nil(t, found[0].ReeraseJobID)
			require.Equal(t, "1", resurrectionCount(t, d))
			testsvc.Eventually(t, time.Minute, func() bool { return resurrections(t, d, a)[0].SeenCount >= 2 }, "a later pass sees it again")
			require.Equal(t, "1", resurrectionCount(t, d), "one resurrection, counted once")
			require.Equal(t, leftA, s.pgLeft(t, a), "reported, not erased")
			require.Empty(t, resurrections(t, d, b))

			// Enable reerase and reload.
			cfg, err := os.ReadFile(d.ConfigPath)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(d.ConfigPath, bytes.Replace(cfg, []byte("reerase = false"), []byte("reerase = true"), 1), 0o600))
			out, errOut, code = d.CLI("reload")
			require.Equal(t, 0, code, "%s\n%s", out, errOut)
			var reerase string
			testsvc.Eventually(t, time.Minute, func() bool {
				r := resurrections(t, d, a)[0]
				if r.ReeraseJobID != nil {
					reerase = *r.ReeraseJobID
				}
				return r.Action == "REERASE" && r.ReeraseJobID != nil
			}, "a pass queues the re-erase")
			second := waitJob(t, d, a, "COMPLETED", 2*time.Minute)
			require.Equal(t, reerase, second.ID)
			require.Zero(t, total(s.pgLeft(t, a)))
			require.Equal(t, sumB, s.pgChecksum(t, b), "B unchanged by the restore and the re-erase")

			rec2, _ := apitest.Expect(t, d, 200, nil).Receipt(t.Context(), a)
			var doc struct {
				JobID    string `json:"job_id"`
				Reerases *struct {
					JobID         string `json:"job_id"`
					ReceiptSHA256 string `json:"receipt_sha256"`
				} `json:"reerases"`
			}
			require.NoError(t, json.Unmarshal(rec2, &doc))
			require.Equal(t, second.ID, doc.JobID)
			require.NotNil(t, doc.Reerases, "%s", rec2)
			require.Equal(t, first.ID, doc.Reerases.JobID)
			require.Equal(t, firstHash, doc.Reerases.ReceiptSHA256)
			recFile := filepath.Join(dir, "receipt2.json")
			require.NoError(t, os.WriteFile(recFile, rec2, 0o600))
			out, errOut, code = d.CLI("receipt", "verify", recFile, "--key", pub)
			require.Equal(t, 0, code, "the re-erase receipt verifies: %s\n%s", out, errOut)

			testsvc.Eventually(t, time.Minute, func() bool { return resurrections(t, d, a)[0].ResolvedAt != nil }, "a pass finds A clean again")
			require.Equal(t, "1", resurrectionCount(t, d))
			out, errOut, code = d.CLI("ledger", "export", "--out", ledgerFile)
			require.Equal(t, 0, code, "%s\n%s", out, errOut)
			out, errOut, code = d.CLI("ledger", "verify", ledgerFile)
			require.Equal(t, 0, code, "%s\n%s", out, errOut)
			require.Contains(t, out, "VALID: 2 erasures")
		})
	}
}
