package enum_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/enum"
)

var update = flag.Bool("update", false, "rewrite docs/values.md from the declarations")

// list is one declared enumeration as the docs show it.
type list struct {
	title, decl string
	values      []string
	meanings    []string
}

func described[T ~string](title, decl string, vs []enum.Value[T]) list {
	l := list{title: title, decl: decl}
	for _, v := range vs {
		l.values = append(l.values, string(v.Value))
		l.meanings = append(l.meanings, v.Meaning)
	}
	return l
}

func lists() []list {
	return []list{
		described("Dead-letter statuses", "dlq.StatusesDescribed", dlq.StatusesDescribed),
		described("Bulk operation actions", "dlq.OperationActionsDescribed", dlq.OperationActionsDescribed),
		described("Bulk operation states", "dlq.OperationStatesDescribed", dlq.OperationStatesDescribed),
		described("Deletion job statuses", "deletion.JobStatusesDescribed", deletion.JobStatusesDescribed),
		described("Deleter statuses (within a job)", "deletion.DeleterStatusesDescribed", deletion.DeleterStatusesDescribed),
	}
}

func valuesDoc() string {
	var b strings.Builder
	b.WriteString("# Values\n\n")
	b.WriteString("The values of lifecycled's enumerations, generated from their declarations in the code\n")
	b.WriteString("(`go test ./daemon/internal/enum -update` rewrites this file; a test fails when it is stale).\n")
	b.WriteString("The API's messages, the CLI's help and completion and the console's options come from the same\n")
	b.WriteString("declarations.\n")
	for _, l := range lists() {
		fmt.Fprintf(&b, "\n## %s\n\nDeclared in `%s`.\n\n| value | meaning |\n|---|---|\n", l.title, l.decl)
		for i, v := range l.values {
			fmt.Fprintf(&b, "| `%s` | %s |\n", v, l.meanings[i])
		}
	}
	return b.String()
}

func repoFile(t *testing.T, rel string) string {
	_, here, _, ok := runtime.Caller(0)
	require.True(t, ok)
	return filepath.Join(filepath.Dir(here), "..", "..", "..", rel)
}

// docs/values.md is what the declarations say.
func TestValuesDocIsGeneratedFromTheDeclarations(t *testing.T) {
	path := repoFile(t, "docs/values.md")
	want := valuesDoc()
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, want, string(got), "docs/values.md is stale: go test ./daemon/internal/enum -update")
}

var backticked = regexp.MustCompile("`([A-Za-z_]+)`")

// A table row of the docs that lists values of an enumeration (two or
// more of them, as code) lists them all: a value added to the declaration
// and forgotten in a reference table fails here. A row that lists all of
// another enumeration's values (job statuses, which share some with
// operation states) is that enumeration's. Prose may name some values (a
// transition, the final states).
func TestDocsThatListValuesListThemAll(t *testing.T) {
	checked := 0
	for _, doc := range []string{"docs/reference.md", "docs/operations.md", "docs/console.md", "README.md"} {
		data, err := os.ReadFile(repoFile(t, doc))
		require.NoError(t, err)
		for _, row := range strings.Split(string(data), "\n") {
			if !strings.HasPrefix(strings.TrimSpace(row), "|") {
				continue
			}
			named := map[string]bool{}
			for _, m := range backticked.FindAllStringSubmatch(row, -1) {
				named[m[1]] = true
			}
			complete := func(l list) bool {
				for _, v := range l.values {
					if !named[v] {
						return false
					}
				}
				return true
			}
			for _, l := range lists() {
				var hits []string
				for _, v := range l.values {
					if named[v] {
						hits = append(hits, v)
					}
				}
				if len(hits) < 2 {
					continue
				}
				checked++
				if len(hits) == len(l.values) || slices.ContainsFunc(lists(), func(other list) bool {
					return other.title != l.title && complete(other) && subset(hits, other.values)
				}) {
					continue
				}
				t.Errorf("%s: %q names %v of the %s but not all of %v", doc, excerpt(row), hits, strings.ToLower(l.title), l.values)
			}
		}
	}
	require.Greater(t, checked, 3, "the reference tables were found")
}

func subset(a, b []string) bool {
	for _, v := range a {
		if !slices.Contains(b, v) {
			return false
		}
	}
	return true
}

func excerpt(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}
