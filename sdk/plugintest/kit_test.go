package plugintest_test

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/sdk/plugintest"
	"github.com/lifecycled/lifecycled/sdk/plugintest/internal/teststore"
)

// The kit's own tests: the kit passes a correct deleter and fails each of
// the deleters under internal/testplugins, which are wrong in one way each,
// with a message that says what to fix. A failing kit run cannot happen
// inside the test that expects it, so each broken plugin is checked by
// running this test binary again (TestKitHelper) and reading its output.

// storeFixture seeds and reads the test store directly.
type storeFixture struct {
	srv *teststore.Server
	dsn string
}

func newStoreFixture(t testing.TB) *storeFixture {
	pw := "kit-pw-" + randomHex(6)
	srv, err := teststore.NewServer("kit", pw)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	// Deleting 3000 items takes 3 s: long enough to cancel or break a
	// Delete part way.
	srv.Delay = time.Millisecond
	return &storeFixture{srv: srv, dsn: teststore.DSN{User: "kit", Password: pw, Addr: srv.Addr()}.String()}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (f *storeFixture) Config(testing.TB) map[string]any {
	return map[string]any{"dsn": f.dsn, "batch_size": 100}
}

func (f *storeFixture) Seed(_ testing.TB, tenant string, n int) int64 {
	f.srv.Seed(tenant, n)
	return int64(n)
}

func (f *storeFixture) Remaining(_ testing.TB, tenant string) int64 {
	return int64(len(f.srv.Items(tenant)))
}

func (f *storeFixture) Checksum(_ testing.TB, tenant string) string {
	items := f.srv.Items(tenant)
	keys := make([]string, 0, len(items))
	for k := range items {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%q=%q\n", k, items[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (f *storeFixture) StopStore(testing.TB) { f.srv.Stop() }

func (f *storeFixture) StartStore(t testing.TB) { require.NoError(t, f.srv.Start()) }

func (f *storeFixture) UnreachableConfig(t testing.TB) (map[string]any, string) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	dsn := teststore.DSN{User: "kit", Password: "unreachable-pw-" + randomHex(4), Addr: addr}
	return map[string]any{"dsn": dsn.String()}, "dsn"
}

func (f *storeFixture) FailMidDelete(testing.TB) func() {
	f.srv.Fail(true)
	return func() { f.srv.Fail(false) }
}

func (f *storeFixture) Secrets(testing.TB) []string { return f.srv.Tokens() }

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// testPlugin builds the programs under internal/testplugins once per test
// binary and returns the path of one.
func testPlugin(t testing.TB, name string) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "kitplugins")
		if buildErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", binDir+string(filepath.Separator), "./internal/testplugins/...").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("build the test plugins: %v", buildErr)
	}
	return filepath.Join(binDir, name)
}

// runKit runs the whole kit against a plugin for the test store.
func runKit(t *testing.T, binary, format string) {
	f := newStoreFixture(t)
	plugintest.RunTenantDeleter(t, plugintest.DeleterOptions{
		Binary:         binary,
		Fixture:        f,
		TenantIDFormat: format,
		BadConfigs: map[string]map[string]any{
			"missing dsn":   {"batch_size": 100},
			"dsn without @": {"dsn": "kit", "batch_size": 100},
			"bad batch":     {"dsn": f.dsn, "batch_size": 0},
			"unknown key":   {"dsn": f.dsn, "batch_sise": 5},
		},
		BadConfigFields:  map[string]string{"dsn without @": "dsn"},
		Seed:             20,
		CancelSeed:       3000,
		ConcurrentWithin: 15 * time.Second,
	})
}

// TestMain removes the test plugins testPlugin built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// TestKitHelper runs the kit against the plugin PLUGINTEST_KIT_PLUGIN
// names; TestKitFailsBrokenPlugins starts it.
func TestKitHelper(t *testing.T) {
	bin := os.Getenv("PLUGINTEST_KIT_PLUGIN")
	if bin == "" {
		t.Skip("run by TestKitFailsBrokenPlugins")
	}
	runKit(t, bin, os.Getenv("PLUGINTEST_KIT_FORMAT"))
}

// TestKitPassesACorrectPlugin is not parallel: Go runs it before the
// parallel tests, alone, so the kit's timing checks (a cancelled Delete
// stops within a batch) run without the broken plugins' eight kit runs
// beside it.
func TestKitPassesACorrectPlugin(t *testing.T) {
	for name, format := range map[string]string{"uuid": "uuid", "permissive": `^.{1,200}$`} {
		t.Run(name, func(t *testing.T) { runKit(t, testPlugin(t, "good"), format) })
	}
}

func TestKitFailsBrokenPlugins(t *testing.T) {
	t.Parallel()
	// Each plugin is wrong in the way its main.go says; the kit must fail
	// it with these words (the check, and what to fix). Each runs under a
	// permissive tenant id format; "/uuid" runs under the default format,
	// which refuses every bystander id: the kit's permissive pass must
	// catch the plugin anyway.
	cases := map[string][]string{
		// The two bugs of issue 17 the kit once passed.
		"ignorescancel": {"went on deleting after its Delete was cancelled", "check ctx.Err() before each batch"},
		"padspace":      {`the same id with a trailing space as tenant A`, "match the tenant id exactly, byte for byte"},
		"padspace/uuid": {`the same id with a trailing space as tenant P`, `under tenant id format "^.{1,255}$"`},
		// Sloppy matches, one bystander kind each.
		"trimspace":   {"the same id with a leading space"},
		"casefold":    {"the same id in upper case"},
		"unicodefold": {"the same id in Unicode NFD"},
		"accentfold":  {"the same id without the accent"},
		"numeric":     {"another spelling of the same number"},
		"prefix":      {"the id with the suffix :x"},
		"tabtrim":     {`Count("\t`, "= 20, want 0: a tenant id is data, never syntax"},
		// A store that is down or unreachable.
		"downzero":           {"Count returned 0 while the store was down", "Delete succeeded (0 deleted) while the store was down"},
		"downpermanent":      {"Count while the store was down failed with a permanent error", "Configure against a store that cannot be reached failed with a permanent error"},
		"lazyconfigure":      {"Configure succeeded against a store that cannot be reached"},
		"unnamedunreachable": {`which does not name "dsn"`},
		// The partial count of an interrupted Delete.
		"overcount": {"count a batch only once the store confirmed it"},
		// Config errors that do not name the field.
		"fieldless": {"put each problem under the key the operator must change"},
		// Secrets in logs and errors.
		"leakydsn":   {"the plugin's stderr holds the secret from the password in the fixture's config.dsn"},
		"leakytoken": {"holds the secret from the fixture's Secrets"},
		// Plans an operator would approve wrongly.
		"planfingerprintcounts": {"Plan of a tenant with no data has fingerprint", "fingerprint changed with Delete", "never the tenant id or a count"},
		"planmiscount":          {"Plan(A) expects 19 items in all, want the 20 seeded", "compute them with Count's code"},
		"ignoresplan":           {"which the plugin's Plan never gave, succeeded (deleted 20)", "sdk.Fingerprints.Check returns sdk.PlanChanged", "after Delete with a stale plan fingerprint, the data of tenant B changed"},
		// Resources held across a Delete (the SQL deleters' proof once did).
		"pooldeadlock": {"9 Deletes at once did not all finish within 15s", "fewer Deletes at once than the pool has connections"},
	}
	type kitRun struct {
		out []byte
		err error
	}
	runs := make(map[string]chan kitRun, len(cases))
	slots := make(chan struct{}, brokenKitRuns)
	for name := range cases {
		plugin, format := name, `^.{1,200}$`
		if p, ok := strings.CutSuffix(name, "/uuid"); ok {
			plugin, format = p, "uuid"
		}
		bin := testPlugin(t, plugin)
		done := make(chan kitRun, 1)
		runs[name] = done
		go func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			cmd := exec.Command(os.Args[0], "-test.run=^TestKitHelper$", "-test.v", "-test.count=1", "-test.timeout=10m")
			cmd.Env = append(os.Environ(), "PLUGINTEST_KIT_PLUGIN="+bin, "PLUGINTEST_KIT_FORMAT="+format)
			out, err := cmd.CombinedOutput()
			done <- kitRun{out, err}
		}()
	}
	for name, want := range cases {
		t.Run(name, func(t *testing.T) {
			r := <-runs[name]
			require.Error(t, r.err, "the kit passed %s:\n%s", name, r.out)
			for _, w := range want {
				require.Contains(t, string(r.out), w, "the kit's output for %s", name)
			}
			if testing.Verbose() {
				t.Logf("%s: the kit failed it with:\n%s", name, failures(string(r.out)))
			}
		})
	}
}

// brokenKitRuns is how many kit runs against broken plugins go at once.
// A run spends most of its ten seconds waiting on the test store's delays
// (the cancel and the failure part way through a Delete), not on a CPU:
// more at once than the test's -parallel (GOMAXPROCS) shortens the
// package's time without adding work.
const brokenKitRuns = 8

// failures picks the failure messages out of go test -v output.
func failures(out string) string {
	var b strings.Builder
	for _, line := range strings.Split(out, "\n") {
		trim := strings.TrimSpace(line)
		if strings.HasPrefix(trim, "--- FAIL") || strings.Contains(line, ".go:") && !strings.Contains(line, "plugin") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}
