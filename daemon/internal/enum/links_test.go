package enum_test

import (
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// Every relative link of the repository's Markdown files names a file or
// directory that exists and, with a #fragment into a Markdown file, one of
// its headings: a section moved to another page fails here, not on an
// operator at 3 a.m.
func TestMarkdownLinksResolve(t *testing.T) {
	root, err := filepath.Abs(repoFile(t, "."))
	require.NoError(t, err)
	docs := markdownFiles(t, root)
	require.Greater(t, len(docs), 10, "the repository's Markdown files were found")
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		a := headingAnchors(string(data))
		anchors[path] = a
		return a
	}
	checked := 0
	for _, doc := range docs {
		data, err := os.ReadFile(doc)
		require.NoError(t, err)
		rel, _ := filepath.Rel(root, doc)
		for _, l := range markdownLinks(string(data)) {
			target, ok := localTarget(l.dest)
			if !ok {
				continue
			}
			checked++
			pathPart, frag, _ := strings.Cut(target, "#")
			file := doc
			if pathPart != "" {
				p, err := url.PathUnescape(pathPart)
				if err != nil {
					t.Errorf("%s:%d: link %q: %v", rel, l.line, l.dest, err)
					continue
				}
				file = filepath.Join(filepath.Dir(doc), filepath.FromSlash(p))
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s:%d: link %q: no such file or directory", rel, l.line, l.dest)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(strings.ToLower(file), ".md") {
				continue
			}
			if f, err := url.PathUnescape(frag); err == nil {
				frag = f
			}
			if !anchorsOf(file)[frag] {
				t.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", rel, l.line, l.dest, filepath.ToSlash(mustRel(root, file)), frag)
			}
		}
	}
	require.Greater(t, checked, 50, "the relative links were found")
}

func TestHeadingAnchorsFollowGitHub(t *testing.T) {
	doc := "# Operating lifecycled\n" +
		"## Reload, stop, restart\n" +
		"### `GET /api/v1/tenants/{tenant}/counts`\n" +
		"### Schedule: grace period and `not_before`\n" +
		"## [Linked](x.md) *text*\n" +
		"```\n# not a heading\n```\n" +
		"## Reload, stop, restart\n" +
		"<a id=\"custom\"></a>\n"
	got := headingAnchors(doc)
	for _, want := range []string{"operating-lifecycled", "reload-stop-restart", "get-apiv1tenantstenantcounts",
		"schedule-grace-period-and-not_before", "linked-text", "reload-stop-restart-1", "custom"} {
		require.True(t, got[want], "anchor %q in %v", want, got)
	}
	require.False(t, got["not-a-heading"])
	links := markdownLinks("a [b](c.md#d) `[e](f.md)` [`g`](h.md) ![i](j.png)\n```\n[k](l.md)\n```\n[m]: n.md \"t\"\n")
	var dests []string
	for _, l := range links {
		dests = append(dests, l.dest)
	}
	require.Equal(t, []string{"c.md#d", "h.md", "j.png", "n.md"}, dests)
}

func mustRel(root, path string) string {
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return path
	}
	return rel
}

// markdownFiles are the *.md files under root, outside .git, vendor and
// node_modules.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "vendor", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), ".md") {
			out = append(out, path)
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

type mdLink struct {
	dest string
	line int
}

var (
	fence      = regexp.MustCompile("^\\s*(```|~~~)")
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	inlineLink = regexp.MustCompile(`\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refDef     = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?`)
	atxHeading = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	linkText   = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTag    = regexp.MustCompile(`<[^>]+>`)
)

// markdownLines calls fn with each line outside fenced code blocks.
func markdownLines(doc string, fn func(n int, line string)) {
	inFence := ""
	for i, line := range strings.Split(doc, "\n") {
		if m := fence.FindStringSubmatch(line); m != nil {
			switch {
			case inFence == "":
				inFence = m[1]
				continue
			case inFence == m[1]:
				inFence = ""
				continue
			}
		}
		if inFence != "" {
			continue
		}
		fn(i+1, line)
	}
}

// markdownLinks are the destinations of a document's inline links, images
// and link definitions, outside code.
func markdownLinks(doc string) []mdLink {
	var out []mdLink
	markdownLines(doc, func(n int, line string) {
		line = codeSpan.ReplaceAllString(line, "")
		if m := refDef.FindStringSubmatch(line); m != nil {
			out = append(out, mdLink{dest: m[1], line: n})
			return
		}
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			out = append(out, mdLink{dest: m[1], line: n})
		}
	})
	return out
}

// localTarget is dest when it points into the repository: not a URL with a
// scheme, not an absolute path.
func localTarget(dest string) (string, bool) {
	if u, err := url.Parse(dest); err == nil && u.Scheme != "" {
		return "", false
	}
	if strings.HasPrefix(dest, "/") || strings.HasPrefix(dest, "//") {
		return "", false
	}
	return dest, true
}

// headingAnchors are the anchors GitHub gives a document's headings: the
// heading's text in lower case, every character but letters, digits, spaces,
// '-' and '_' dropped, each space a '-', and "-1", "-2", ... appended to a
// repeated one; plus explicit <a name|id="..."> anchors.
func headingAnchors(doc string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	markdownLines(doc, func(_ int, line string) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		m := atxHeading.FindStringSubmatch(line)
		if m == nil {
			return
		}
		text := linkText.ReplaceAllString(m[2], "$1")
		text = htmlTag.ReplaceAllString(text, "")
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		anchor := b.String()
		if n, ok := seen[anchor]; ok {
			seen[anchor] = n + 1
			anchor += "-" + strconv.Itoa(n+1)
		} else {
			seen[anchor] = 0
		}
		out[anchor] = true
	})
	return out
}
