package adminapi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// The codes the API can answer and the codes docs/operations.md lists are
// the same set.
func TestEveryCodeIsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "operations.md"))
	require.NoError(t, err)
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`(SYS_[A-Z_]+)`").FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}
	var missing []string
	for _, c := range Codes() {
		if !documented[c] {
			missing = append(missing, c)
		}
		delete(documented, c)
	}
	var extra []string
	for c := range documented {
		if !regexp.MustCompile(`^SYS_[A-Z]+(_[A-Z]+)*$`).MatchString(c) || c == "SYS_" {
			continue
		}
		extra = append(extra, c)
	}
	sort.Strings(missing)
	sort.Strings(extra)
	require.Empty(t, missing, "codes the API answers but docs/operations.md does not list")
	require.Empty(t, extra, "codes docs/operations.md lists but the API never answers")
}

// Every kind or code written in this package's source is one the table
// knows, so that a new one cannot slip past the documentation check.
func TestNoCodeOutsideTheTable(t *testing.T) {
	known := map[string]bool{}
	for _, k := range answerKinds {
		known[k] = true
	}
	for _, row := range errorTable {
		known[row.kind] = true
		for _, k := range row.scoped {
			known[k] = true
		}
	}
	for _, c := range fixedCodes {
		known[c] = true
	}
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	for _, name := range files {
		if regexp.MustCompile(`_test\.go$`).MatchString(name) {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			kv, ok := n.(*ast.KeyValueExpr)
			if !ok {
				return true
			}
			key, ok := kv.Key.(*ast.Ident)
			if !ok || (key.Name != "kind" && key.Name != "code") {
				return true
			}
			lit, ok := kv.Value.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			v, _ := strconv.Unquote(lit.Value)
			require.True(t, known[v], "%s: %s %q is not in the error table (errortable.go)", fset.Position(kv.Pos()), key.Name, v)
			return true
		})
	}
}
