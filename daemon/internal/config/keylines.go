package config

import (
	"fmt"
	"regexp"
	"strings"
)

var indexRE = regexp.MustCompile(`\.\d+(\.|$)`)

func stripIndexes(key string) string {
	for {
		s := indexRE.ReplaceAllString(key, "$1")
		if s == key {
			return s
		}
		key = s
	}
}

var (
	tableRE      = regexp.MustCompile(`^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$`)
	arrayTableRE = regexp.MustCompile(`^\s*\[\[\s*([^\[\]]+?)\s*\]\]\s*(#.*)?$`)
	keyRE        = regexp.MustCompile(`^\s*([A-Za-z0-9_\-."]+?)\s*=`)
)

// indexKeyLines maps dotted keys to the line that defines them. The TOML
// library keeps key positions private, and operators need lines to fix a file.
// Both indexed ("deleter.1.name") and unindexed ("deleter.name", first
// occurrence) forms are recorded.
func indexKeyLines(text string) map[string]int {
	out := map[string]int{}
	arrayCount := map[string]int{}
	prefix := ""
	record := func(key string, line int) {
		if _, ok := out[key]; !ok {
			out[key] = line
		}
		plain := stripIndexes(key)
		if _, ok := out[plain]; !ok {
			out[plain] = line
		}
	}
	inMultiline := false
	for i, raw := range strings.Split(text, "\n") {
		line := i + 1
		if strings.Count(raw, `"""`)%2 == 1 || strings.Count(raw, `'''`)%2 == 1 {
			inMultiline = !inMultiline
			if !inMultiline {
				continue
			}
		} else if inMultiline {
			continue
		}
		if m := arrayTableRE.FindStringSubmatch(raw); m != nil {
			name := unquoteKey(m[1])
			// Nested arrays of tables are rare in our schema; index by the
			// top-level name only.
			idx := arrayCount[name]
			arrayCount[name] = idx + 1
			prefix = fmt.Sprintf("%s.%d", name, idx)
			record(prefix, line)
			continue
		}
		if m := tableRE.FindStringSubmatch(raw); m != nil {
			name := unquoteKey(m[1])
			// A sub-table of the most recent array element ([deleter.config]).
			first := strings.SplitN(name, ".", 2)[0]
			if n, ok := arrayCount[first]; ok && strings.Contains(name, ".") {
				name = fmt.Sprintf("%s.%d.%s", first, n-1, strings.SplitN(name, ".", 2)[1])
			}
			prefix = name
			record(prefix, line)
			continue
		}
		if m := keyRE.FindStringSubmatch(raw); m != nil {
			key := unquoteKey(m[1])
			if prefix != "" {
				key = prefix + "." + key
			}
			record(key, line)
		}
	}
	return out
}

func unquoteKey(k string) string {
	parts := strings.Split(k, ".")
	for i, p := range parts {
		parts[i] = strings.Trim(strings.TrimSpace(p), `"'`)
	}
	return strings.Join(parts, ".")
}
