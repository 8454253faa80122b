package config

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
)

type reporter struct {
	file     string
	lines    map[string]int
	problems []Problem
	// seen: keys with a problem already; a key gets one problem (an unset
	// variable in a *_file path is not reported again as an unreadable file).
	seen map[string]bool
	// names: the name of each [[deleter]] and [[dlq_source]], by index, so
	// that problems name "deleter[postgres:app]" rather than "deleter.0".
	names map[string][]string
	// skipSecrets: *_file keys are not checked (ParseOptions.WithoutSecrets).
	skipSecrets bool
}

func (r *reporter) add(line int, key, msg string) {
	if key != "" {
		if r.seen[key] {
			return
		}
		r.seen[key] = true
	}
	r.problems = append(r.problems, Problem{File: r.file, Line: line, Key: key, Msg: msg})
}

// at reports a problem at key, looking up its line.
func (r *reporter) at(key, format string, args ...any) {
	r.add(r.line(key), key, fmt.Sprintf(format, args...))
}

func (r *reporter) line(key string) int {
	if l, ok := r.lines[key]; ok {
		return l
	}
	// Keys inside arrays of tables are indexed ("deleter.1.name"); BurntSushi's
	// Undecoded keys are not, so fall back to the unindexed form.
	if l, ok := r.lines[stripIndexes(key)]; ok {
		return l
	}
	return 0
}

var instanceKeyRE = regexp.MustCompile(`^(deleter|dlq_source)\.(\d+)(\.|$)`)

// named rewrites "deleter.0.config.x" as "deleter[postgres:app].config.x".
func (r *reporter) named(key string) string {
	m := instanceKeyRE.FindStringSubmatchIndex(key)
	if m == nil {
		return key
	}
	kind := key[m[2]:m[3]]
	i, _ := strconv.Atoi(key[m[4]:m[5]])
	names := r.names[kind]
	if i >= len(names) || names[i] == "" {
		return key
	}
	uses := 0
	for _, list := range r.names {
		for _, n := range list {
			if n == names[i] {
				uses++
			}
		}
	}
	if uses > 1 {
		return key // a duplicate name names nothing; keep the position
	}
	return kind + "[" + names[i] + "]" + key[m[6]:]
}

func (r *reporter) err() error {
	for i := range r.problems {
		r.problems[i].Key = r.named(r.problems[i].Key)
	}
	sort.SliceStable(r.problems, func(i, j int) bool {
		a, b := r.problems[i], r.problems[j]
		if a.Line == 0 || b.Line == 0 {
			return a.Line != 0 && b.Line == 0
		}
		return a.Line < b.Line
	})
	return &Error{Problems: r.problems}
}
