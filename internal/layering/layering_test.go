package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// TestModuleKeepsItsLayers runs the rules over the real module.
func TestModuleKeepsItsLayers(t *testing.T) {
	t.Parallel()
	ctx := testsvc.Context(t, 2*time.Minute)
	cmd := exec.CommandContext(ctx, "go", "list", "-deps", "-test=false", "-json", "./...", "./sdk/...")
	cmd.Dir = testsvc.RepoRoot(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	pkgs := decode(t, out)
	require.Greater(t, len(pkgs), 20, "go list listed the module")
	var seen []string
	for _, p := range pkgs {
		switch p.ImportPath {
		case Module + "/sdk", Module + "/sdk/host", Module + "/daemon/internal/dlq":
			seen = append(seen, p.ImportPath)
		}
	}
	require.Len(t, seen, 3, "the packages the rules are about are in the listing")
	require.Empty(t, Violations(pkgs))
}

func decode(t *testing.T, out []byte) []Package {
	t.Helper()
	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p Package
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			return pkgs
		}
		require.NoError(t, err)
		pkgs = append(pkgs, p)
	}
}

// TestViolationsCatchEachRule shows that each rule fails when broken.
func TestViolationsCatchEachRule(t *testing.T) {
	t.Parallel()
	m := func(rel string) string { return Module + "/" + rel }
	tests := map[string]struct {
		pkg  Package
		want int
	}{
		"sdk importing the daemon, even indirectly": {
			pkg:  Package{ImportPath: m("sdk/plugintest"), Deps: []string{m("sdk"), m("internal/testsvc"), m("daemon/internal/config")}},
			want: 2,
		},
		"sdk importing a plugin": {
			pkg:  Package{ImportPath: m("sdk"), Deps: []string{m("plugins/kafka")}},
			want: 1,
		},
		"sdk importing itself and the world": {
			pkg: Package{ImportPath: m("sdk"), Deps: []string{m("sdk/proto/lifecycled/plugin/v1"), "google.golang.org/grpc", Module + "x/y"}},
		},
		"a plugin using the daemon's end of the protocol": {
			pkg:  Package{ImportPath: m("plugins/redis"), Deps: []string{m("sdk"), m("sdk/host"), m("sdk/internal/wire")}},
			want: 1,
		},
		"the example plugin using it through another package": {
			pkg:  Package{ImportPath: m("sdk/example/filestore"), Deps: []string{m("sdk/plugintest"), m("sdk/host")}},
			want: 1,
		},
		"the daemon and the kit using it": {
			pkg: Package{ImportPath: m("daemon/internal/pluginhost"), Deps: []string{m("sdk"), m("sdk/host")}},
		},
		"fx outside the app": {
			pkg:  Package{ImportPath: m("daemon/internal/dlq"), Imports: []string{"go.uber.org/fx"}},
			want: 1,
		},
		"fx in a test outside the app": {
			pkg:  Package{ImportPath: m("daemon/internal/deletion"), XTestImports: []string{"go.uber.org/fx/fxtest"}, TestImports: []string{"go.uber.org/dig"}},
			want: 2,
		},
		"fx in the app": {
			pkg: Package{ImportPath: m("daemon/internal/app"), Imports: []string{"go.uber.org/fx"}},
		},
		"a domain package using the store": {
			pkg:  Package{ImportPath: m("daemon/internal/archive"), Deps: []string{m("daemon/internal/derrors"), m("daemon/internal/store")}},
			want: 1,
		},
		"a domain package using the admin API through another": {
			pkg:  Package{ImportPath: m("daemon/internal/periodic"), Deps: []string{m("daemon/internal/adminapi"), m("daemon/internal/store/sub")}},
			want: 2,
		},
		"the app using the store": {
			pkg: Package{ImportPath: m("daemon/internal/app"), Deps: []string{m("daemon/internal/store"), m("daemon/internal/adminapi")}},
		},
		"a package outside the module": {
			pkg: Package{ImportPath: "example.com/sdk", Imports: []string{"go.uber.org/fx"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := Violations([]Package{tc.pkg})
			require.Len(t, got, tc.want, "%q", got)
		})
	}
}
