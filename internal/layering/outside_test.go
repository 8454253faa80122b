package layering

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// A plugin written outside this repository depends on the sdk module alone:
// a module that requires it (here replaced by the checkout's sdk/, as a
// pseudo-version would be fetched) builds a plugin and its conformance test,
// with no workspace and nothing of the daemon in its build list.
func TestAPluginOutsideTheRepositoryBuildsAgainstTheSDKModuleAlone(t *testing.T) {
	t.Parallel()
	ctx := testsvc.Context(t, 5*time.Minute)
	dir := t.TempDir()
	sdk := filepath.Join(testsvc.RepoRoot(t), "sdk")
	files := map[string]string{
		"go.mod": "module example.com/counter\n\ngo 1.26.0\n\nrequire github.com/lifecycled/lifecycled/sdk v0.0.0-00010101000000-000000000000\n\n" +
			"replace github.com/lifecycled/lifecycled/sdk => " + sdk + "\n",
		"main.go": `package main

import (
	"context"

	"github.com/lifecycled/lifecycled/sdk"
)

type counter struct{}

func (counter) Configure(context.Context, *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	return &sdk.ConfigureResponse{PluginVersion: "0.0.1"}, nil
}
func (counter) Count(context.Context, *sdk.CountRequest) (*sdk.CountResponse, error) {
	return &sdk.CountResponse{}, nil
}
func (counter) Delete(context.Context, *sdk.DeleteRequest, sdk.Progress) (*sdk.DeleteResponse, error) {
	return &sdk.DeleteResponse{}, nil
}

func main() { sdk.ServeTenantDeleter(counter{}) }
`,
		"main_test.go": `package main

import (
	"testing"

	"github.com/lifecycled/lifecycled/sdk/plugintest"
)

var _ = plugintest.HostileTenantIDs
var _ testing.TB
`,
	}
	for name, text := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	run := func(args ...string) string {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s: %s", strings.Join(args, " "), out)
		return string(out)
	}
	run("mod", "tidy")
	run("build", "-o", filepath.Join(dir, "plugin"), ".")
	run("vet", ".")
	deps := run("list", "-deps", "-test", ".")
	require.NotContains(t, deps, "github.com/lifecycled/lifecycled/daemon")
	require.NotContains(t, deps, "github.com/lifecycled/lifecycled/internal")
	mods := run("list", "-m", "all")
	require.NotContains(t, mods, "go.uber.org/fx", "the daemon's dependencies stay out")
	require.NotContains(t, mods, "jackc/pgx", "the daemon's dependencies stay out")
}
