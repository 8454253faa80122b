package testsvc

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Binary names built by Binaries, by the package that builds them.
var binaries = map[string]string{
	"lifecycled":                 "./daemon",
	"lifecycled-plugin-postgres": "./plugins/postgres",
	"lifecycled-plugin-redis":    "./plugins/redis",
	"lifecycled-plugin-dynamodb": "./plugins/dynamodb",
	"lifecycled-plugin-kafka":    "./plugins/kafka",
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
	buildOut  []byte
)

// Binaries returns a directory holding the daemon and every plugin, built
// from this checkout once per test process (with -race when the tests run
// with it). LIFECYCLED_TEST_BIN names a directory built beforehand instead
// (the Makefile sets it, so that packages share one build).
func Binaries(t testing.TB) string {
	t.Helper()
	if dir := os.Getenv("LIFECYCLED_TEST_BIN"); dir != "" {
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(RepoRoot(t), dir)
		}
		return dir
	}
	buildOnce.Do(func() {
		root := RepoRoot(t)
		buildDir = filepath.Join(root, "bin", "test")
		if RaceEnabled {
			buildDir = filepath.Join(root, "bin", "test-race")
		}
		for name, pkg := range binaries {
			args := []string{"build"}
			if RaceEnabled {
				args = append(args, "-race")
			}
			args = append(args, "-o", filepath.Join(buildDir, name), pkg)
			cmd := exec.Command("go", args...)
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr, buildOut = err, out
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatalf("build binaries: %v\n%s", buildErr, buildOut)
	}
	return buildDir
}

// BuildPackage builds one main package of this module into dir/name, for
// tests that need a special binary (a misbehaving plugin, an example).
func BuildPackage(t testing.TB, pkg, dir, name string) string {
	t.Helper()
	out := filepath.Join(dir, name)
	args := []string{"build"}
	if RaceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "-o", out, pkg)
	cmd := exec.Command("go", args...)
	cmd.Dir = RepoRoot(t)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, b)
	}
	return out
}
