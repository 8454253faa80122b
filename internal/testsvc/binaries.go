package testsvc

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Binary names and the packages that build them.
var binaries = map[string]string{
	"lifecycled":                 "./daemon",
	"lifecycled-plugin-postgres": "./plugins/postgres",
	"lifecycled-plugin-redis":    "./plugins/redis",
	"lifecycled-plugin-dynamodb": "./plugins/dynamodb",
	"lifecycled-plugin-kafka":    "./plugins/kafka",
	"lifecycled-plugin-pgtable":  "./plugins/pgtable",
	"lifecycled-plugin-rabbitmq": "./plugins/rabbitmq",
	"lifecycled-plugin-mysql":    "./plugins/mysql",
}

var (
	buildMu   sync.Mutex
	built     = map[string]bool{}
	buildErrs = map[string]string{}
)

// binDir is where this checkout's test builds go: bin/test.
func binDir(t testing.TB) string {
	if dir := os.Getenv("LIFECYCLED_TEST_BIN"); dir != "" {
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(RepoRoot(t), dir)
		}
		return dir
	}
	return filepath.Join(RepoRoot(t), "bin", "test")
}

// Binary returns the path of one of the project's binaries (lifecycled or
// lifecycled-plugin-*), built from this checkout once per test process.
// When LIFECYCLED_TEST_BIN names a directory built beforehand (the
// Makefile does), it is used as is.
//
// The binaries are built without the race detector even when the tests
// run with it: the processes the tests start are tested as a black box,
// and the race detector covers their code in every package's own tests
// (and the test process itself). Built with -race they took 2.4 times the
// CPU of the end-to-end tests (494 s against 205 s, same machine), which
// CI's time could not afford.
func Binary(t testing.TB, name string) string {
	t.Helper()
	dir := binDir(t)
	if os.Getenv("LIFECYCLED_TEST_BIN") != "" {
		return filepath.Join(dir, name)
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	if msg, failed := buildErrs[name]; failed {
		t.Fatalf("build %s: %s", name, msg)
	}
	if !built[name] {
		pkg, ok := binaries[name]
		if !ok {
			t.Fatalf("unknown binary %q", name)
		}
		args := []string{"build", "-o", filepath.Join(dir, name), pkg}
		cmd := exec.Command("go", args...)
		cmd.Dir = RepoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErrs[name] = err.Error() + "\n" + string(out)
			t.Fatalf("build %s: %v\n%s", name, err, out)
		}
		built[name] = true
	}
	return filepath.Join(dir, name)
}

// Binaries returns a directory holding the daemon and every plugin (the
// daemon's plugin_dir in tests), building them as Binary does.
func Binaries(t testing.TB) string {
	t.Helper()
	for name := range binaries {
		Binary(t, name)
	}
	return binDir(t)
}

// BuildPackage builds one main package of this module into dir/name, for
// tests that need a special binary (a misbehaving plugin, an example).
func BuildPackage(t testing.TB, pkg, dir, name string) string {
	t.Helper()
	out := filepath.Join(dir, name)
	args := []string{"build", "-o", out, pkg}
	cmd := exec.Command("go", args...)
	cmd.Dir = RepoRoot(t)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, b)
	}
	return out
}
