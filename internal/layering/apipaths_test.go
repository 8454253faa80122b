package layering

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// No API path is a string literal outside the server and the typed client.
func TestAPIPathsAreWrittenOnlyByTheServerAndTheClient(t *testing.T) {
	t.Parallel()
	found, err := APIPathLiterals(testsvc.RepoRoot(t))
	require.NoError(t, err)
	require.Empty(t, found, "call daemon/adminclient instead of building the path")
}

// The check finds a path built from a literal, and leaves comments and
// the owners alone.
func TestAPIPathLiteralsFindsAPathOutsideTheOwners(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write := func(rel, src string) {
		path := filepath.Join(root, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(src), 0o644))
	}
	write("daemon/internal/cli/x.go", "package cli\n\n// GET /api/v1/status is fine in a comment.\nvar p = \"/api/v1/dlq/\" + id\nvar h = `/readyz`\nvar ui = \"/ui/dlq\"\n")
	write("daemon/adminclient/paths.go", "package adminclient\n\nconst p = \"/api/v1/status\"\n")
	write("daemon/internal/adminapi/server.go", "package adminapi\n\nconst p = \"/healthz\"\n")
	write("daemon/internal/store/keys_test.go", "package store\n\nconst route = \"/api/v1/tenants/t/deletion\"\n")
	write("daemon/e2e/x_test.go", "package e2e\n\nconst p = \"/metrics\"\n")
	found, err := APIPathLiterals(root)
	require.NoError(t, err)
	require.Equal(t, []string{`daemon/e2e/x_test.go:3: "/metrics"`, `daemon/internal/cli/x.go:4: "/api/v1/dlq/"`, "daemon/internal/cli/x.go:5: `/readyz`"}, found,
		"a unit test that holds a path as data is left alone")
}
