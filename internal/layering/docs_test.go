package layering

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// docs/architecture.md is a map that names every package of the module.
func TestArchitectureMapNamesEveryPackage(t *testing.T) {
	t.Parallel()
	root := testsvc.RepoRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	require.NoError(t, err)
	require.Less(t, len(doc), MaxMapBytes, "docs/architecture.md is a map: rationale goes to docs/design.md")
	var paths []string
	for _, p := range listModule(t, root) {
		paths = append(paths, p.ImportPath)
	}
	require.Greater(t, len(paths), 40)
	require.Empty(t, Unnamed(string(doc), paths), "name each package in docs/architecture.md")
}

func TestUnnamedFindsAPackageTheMapLeavesOut(t *testing.T) {
	t.Parallel()
	doc := "```\nstore ── dlq\n```\n| `daemon/internal/dlq` | x |\n| `bench/cmd/...` | y |\n"
	got := Unnamed(doc, []string{Module + "/daemon/internal/dlq", Module + "/bench/cmd/dlqbench", Module + "/daemon/internal/store", "example.com/other"})
	require.Equal(t, []string{"daemon/internal/store"}, got)
}

// listModule is `go list` of every package of the module and the sdk.
func listModule(t *testing.T, root string) []Package {
	t.Helper()
	ctx := testsvc.Context(t, 2*time.Minute)
	cmd := exec.CommandContext(ctx, "go", "list", "-json", "./...", "./sdk/...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	return decode(t, out)
}
