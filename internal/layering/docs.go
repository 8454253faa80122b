package layering

import (
	"regexp"
	"strings"
)

// MaxMapBytes bounds docs/architecture.md: a map is read in a minute;
// rationale goes to docs/design.md.
const MaxMapBytes = 10 << 10

var (
	backticked = regexp.MustCompile("`([^`\n]+)`")
	// fenced is a code block, whose fences would pair with the backticks
	// of the text.
	fenced = regexp.MustCompile("(?s)```.*?```")
)

// Unnamed lists the packages of the module (import paths) that the map
// does not name, as `rel/path` or under a `rel/...` it names.
func Unnamed(doc string, importPaths []string) []string {
	named := map[string]bool{}
	var trees []string
	for _, m := range backticked.FindAllStringSubmatch(fenced.ReplaceAllString(doc, ""), -1) {
		if tree, ok := strings.CutSuffix(m[1], "/..."); ok {
			trees = append(trees, tree)
			continue
		}
		named[m[1]] = true
	}
	var out []string
	for _, p := range importPaths {
		rel, ok := within(p, Module)
		if !ok {
			continue
		}
		if rel == "" {
			rel = "."
		}
		if named[rel] || func() bool {
			for _, t := range trees {
				if under(rel, t) {
					return true
				}
			}
			return false
		}() {
			continue
		}
		out = append(out, rel)
	}
	return out
}
