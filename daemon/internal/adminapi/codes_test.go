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

// The codes the API can answer and the codes docs/reference.md lists are
// the same set, and the operator's guide and the runbooks name no code the
// API never answers.
func TestEveryCodeIsDocumented(t *testing.T) {
	docCodes := func(rel string) map[string]bool {
		doc, err := os.ReadFile(filepath.Join("..", "..", "..", filepath.FromSlash(rel)))
		require.NoError(t, err)
		out := map[string]bool{}
		for _, m := range regexp.MustCompile("`(SYS_[A-Z_]+)`").FindAllStringSubmatch(string(doc), -1) {
			out[m[1]] = true
		}
		return out
	}
	answered := map[string]bool{}
	for _, c := range Codes() {
		answered[c] = true
	}
	documented := docCodes("docs/reference.md")
	var missing []string
	for c := range answered {
		if !documented[c] {
			missing = append(missing, c)
		}
	}
	runbooks, err := filepath.Glob(filepath.Join("..", "..", "..", "docs", "runbooks", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, runbooks)
	docs := []string{"docs/reference.md", "docs/operations.md"}
	for _, rb := range runbooks {
		docs = append(docs, "docs/runbooks/"+filepath.Base(rb))
	}
	var extra []string
	for _, doc := range docs {
		for c := range docCodes(doc) {
			if !regexp.MustCompile(`^SYS_[A-Z]+(_[A-Z]+)*$`).MatchString(c) || c == "SYS_" || answered[c] {
				continue
			}
			extra = append(extra, doc+": "+c)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	require.Empty(t, missing, "codes the API answers but docs/reference.md does not list")
	require.Empty(t, extra, "codes the docs name but the API never answers")
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
