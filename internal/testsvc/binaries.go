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
	"lifecycled-plugin-mysql":    "./plugins/mysql",
}

var (
	buildMu   sync.Mutex
	built     = map[string]bool{}
	buildErrs = map[string]string{}
)

// binDir is where this checkout's test builds go: bin/test, or
// bin/test-race when the tests run with the race detector.
func binDir(t testing.TB) string {
	if dir := os.Getenv("LIFECYCLED_TEST_BIN"); dir != "" {
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(RepoRoot(t), dir)
		}
		return dir
	}
	if RaceEnabled {
		return filepath.Join(RepoRoot(t), "bin", "test-race")
	}
	return filepath.Join(RepoRoot(t), "bin", "test")
}

// Binary returns the path of one of the project's binaries (lifecycled or
// lifecycled-plugin-*), built from this checkout once per test process,
// with -race when the tests run with it. When LIFECYCLED_TEST_BIN names a
// directory built beforehand (the Makefile does), it is used as is.
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
		args := append([]string{"build"}, raceFlags()...)
		args = append(args, "-o", filepath.Join(dir, name), pkg)
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

// raceFlags are the build flags of the Makefile's RACE when the tests run
// with the race detector.
func raceFlags() []string {
	if !RaceEnabled {
		return nil
	}
	return []string{"-race"}
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
	args := append([]string{"build"}, raceFlags()...)
	args = append(args, "-o", out, pkg)
	cmd := exec.Command("go", args...)
	cmd.Dir = RepoRoot(t)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, b)
	}
	return out
}
