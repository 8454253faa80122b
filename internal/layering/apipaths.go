package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// pathOwners may write the admin API's paths as literals: the server,
// which registers the routes, and the typed client, which calls them.
// Everything else (the CLI, the console, the tests, the benches) calls the
// client, so that a route changes in two places.
var pathOwners = []string{"daemon/internal/adminapi", "daemon/adminclient", "internal/layering"}

// callerTests are the tests that call the API as a client does; other
// unit tests may hold a path as data (the key an Idempotency-Key is
// stored under).
var callerTests = []string{"daemon/e2e", "daemon/internal/cli", "daemon/internal/console", "bench"}

// isAPIPath reports whether a string is (the start of) an admin API path.
func isAPIPath(s string) bool {
	switch {
	case strings.HasPrefix(s, "/api/"):
		return true
	case s == "/healthz", s == "/readyz", s == "/metrics",
		strings.HasPrefix(s, "/healthz?"), strings.HasPrefix(s, "/readyz?"):
		return true
	}
	return false
}

// APIPathLiterals lists, as "file:line: literal", every string literal
// that is an API path in the Go files under root (a module checkout),
// outside the path owners: in the code, and in the tests of the callers.
// Comments do not count: they may name routes.
func APIPathLiterals(root string) ([]string, error) {
	var out []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "node_modules" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			for _, owner := range pathOwners {
				if rel == owner {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		if strings.HasSuffix(path, "_test.go") && !slices.ContainsFunc(callerTests, func(dir string) bool { return under(rel, dir) }) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err == nil && isAPIPath(s) {
				out = append(out, rel+":"+strconv.Itoa(fset.Position(lit.Pos()).Line)+": "+lit.Value)
			}
			return true
		})
		return nil
	})
	return out, err
}
