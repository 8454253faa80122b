package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// Problem is one thing wrong with a config file.
type Problem struct {
	File string
	Line int    // 0 when unknown
	Key  string // dotted TOML key, "" for whole-file problems
	Msg  string
}

func (p Problem) String() string {
	loc := p.File
	if p.Line > 0 {
		loc = fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	if p.Key == "" {
		return fmt.Sprintf("%s: %s", loc, p.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", loc, p.Key, p.Msg)
}

// Error lists every problem found in one config file.
type Error struct {
	Problems []Problem
}

func (e *Error) Error() string {
	var b strings.Builder
	if len(e.Problems) == 1 {
		b.WriteString("invalid config: ")
		b.WriteString(e.Problems[0].String())
		return b.String()
	}
	fmt.Fprintf(&b, "invalid config (%d problems):", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

// ErrNotFound is returned by Load when the file does not exist.
var ErrNotFound = errors.New("config file not found")

// Load reads, decodes, interpolates and validates the file at path.
// The returned error is an *Error listing every problem, or wraps ErrNotFound.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, path)
		}
		return nil, fmt.Errorf("read config: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	return Parse(string(data), abs, os.LookupEnv)
}

// ParseOptions change how a config is checked.
type ParseOptions struct {
	// WithoutSecrets checks everything but the secrets: *_file keys are
	// neither read nor expanded (their ${CREDENTIALS_DIRECTORY} is only set
	// under systemd). The result is for validation only: it holds no
	// secrets.
	WithoutSecrets bool
}

// LoadWith is Load with options.
func LoadWith(path string, o ParseOptions) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, path)
		}
		return nil, fmt.Errorf("read config: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	return ParseWith(string(data), abs, os.LookupEnv, o)
}

// Parse is Load on text already read; file names the source in messages and
// its directory anchors relative paths. lookupEnv resolves ${VAR}.
func Parse(text, file string, lookupEnv func(string) (string, bool)) (*Config, error) {
	return ParseWith(text, file, lookupEnv, ParseOptions{})
}

// ParseWith is Parse with options.
func ParseWith(text, file string, lookupEnv func(string) (string, bool), o ParseOptions) (*Config, error) {
	cfg := Defaults()
	cfg.Path = file
	cfg.Dir = filepath.Dir(file)
	lines := indexKeyLines(text)
	report := &reporter{file: file, lines: lines, seen: map[string]bool{}, skipSecrets: o.WithoutSecrets}

	md, err := toml.Decode(text, &cfg)
	if err != nil {
		report.decodeError(err)
		return nil, report.err()
	}
	report.names = map[string][]string{}
	for _, d := range cfg.Deleters {
		report.names["deleter"] = append(report.names["deleter"], d.Name)
	}
	for _, d := range cfg.DLQSources {
		report.names["dlq_source"] = append(report.names["dlq_source"], d.Name)
	}
	for _, k := range md.Undecoded() {
		if len(k) > 2 && (k[0] == "deleter" || k[0] == "dlq_source") && k[1] == "config" {
			continue // plugin config is opaque to the daemon; the plugin validates it
		}
		key := k.String()
		report.add(report.line(key), key, "unknown key")
	}
	if !md.IsDefined("version") {
		report.add(0, "version", fmt.Sprintf("missing; add `version = %d` at the top", CurrentVersion))
	}

	interpolateAll(reflect.ValueOf(&cfg).Elem(), "", lookupEnv, report)
	cfg.secrets = map[string]string{}
	if !o.WithoutSecrets {
		cfg.resolveSecretFiles(report)
	}
	cfg.validate(report)
	if len(report.problems) > 0 {
		return nil, report.err()
	}
	return &cfg, nil
}

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

var varRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// Interpolate expands ${VAR} and ${VAR:-default} in s. "$${" is a literal "${".
func Interpolate(s string, lookupEnv func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	const escaped = "\x00escaped-dollar\x00"
	s = strings.ReplaceAll(s, "$${", escaped)
	var missing []string
	out := varRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := varRE.FindStringSubmatch(m)
		if v, ok := lookupEnv(sub[1]); ok && (v != "" || sub[2] == "") {
			return v
		}
		if sub[2] != "" {
			return sub[3]
		}
		missing = append(missing, sub[1])
		return m
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("environment variable %s is not set (use ${%s:-default} for a fallback)", missing[0], missing[0])
	}
	if strings.Contains(out, "${") {
		return "", fmt.Errorf("malformed ${...} in %q", s)
	}
	return strings.ReplaceAll(out, escaped, "${"), nil
}

var durationType = reflect.TypeOf(Duration{})

// interpolateAll walks every string in the decoded config, including the
// opaque plugin config maps, and expands ${VAR}.
func interpolateAll(v reflect.Value, key string, env func(string) (string, bool), r *reporter) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == durationType {
			d := v.Addr().Interface().(*Duration)
			if s, err := Interpolate(d.raw, env); err != nil {
				r.at(key, "%v", err)
			} else {
				d.raw = s
			}
			return
		}
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("toml")
			if !f.IsExported() || tag == "-" {
				continue
			}
			interpolateAll(v.Field(i), joinKey(key, tag), env, r)
		}
	case reflect.String:
		if r.skipSecrets && strings.HasSuffix(key, "_file") {
			return
		}
		s, err := Interpolate(v.String(), env)
		if err != nil {
			r.at(key, "%v", err)
			return
		}
		v.SetString(s)
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			interpolateAll(v.Index(i), fmt.Sprintf("%s.%d", key, i), env, r)
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			elem := v.MapIndex(k)
			sub := joinKey(key, fmt.Sprint(k.Interface()))
			if elem.Kind() == reflect.Interface {
				elem = elem.Elem()
			}
			switch elem.Kind() {
			case reflect.String:
				if r.skipSecrets && strings.HasSuffix(sub, "_file") {
					continue
				}
				s, err := Interpolate(elem.String(), env)
				if err != nil {
					r.at(sub, "%v", err)
					continue
				}
				v.SetMapIndex(k, reflect.ValueOf(s))
			case reflect.Map, reflect.Slice:
				if elem.Kind() == reflect.Slice {
					cp := reflect.MakeSlice(elem.Type(), elem.Len(), elem.Len())
					reflect.Copy(cp, elem)
					for i := 0; i < cp.Len(); i++ {
						item := cp.Index(i)
						if item.Kind() == reflect.Interface && item.Elem().Kind() == reflect.String {
							s, err := Interpolate(item.Elem().String(), env)
							if err != nil {
								r.at(fmt.Sprintf("%s.%d", sub, i), "%v", err)
								continue
							}
							item.Set(reflect.ValueOf(s))
						} else {
							interpolateAll(item, fmt.Sprintf("%s.%d", sub, i), env, r)
						}
					}
					v.SetMapIndex(k, cp)
				} else {
					interpolateAll(elem, sub, env, r)
				}
			}
		}
	case reflect.Interface, reflect.Pointer:
		if !v.IsNil() {
			interpolateAll(v.Elem(), key, env, r)
		}
	}
}

func joinKey(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}

// resolveSecretFiles reads every *_file secret. Daemon-level ones are kept in
// c.secrets; plugin-level ones replace their key in the plugin config, so that
// plugins get secrets through their Configure call and never need the host's
// files, environment or systemd credentials directory.
func (c *Config) resolveSecretFiles(r *reporter) {
	if p := c.Daemon.StatePasswordFile; p != "" {
		if s, err := readSecretFile(c.resolvePath(p)); err != nil {
			r.at("daemon.state_password_file", "%v", err)
		} else {
			c.secrets["daemon.state_password_file"] = s
		}
	}
	for kind, list := range map[string][]PluginInstance{"deleter": c.Deleters, "dlq_source": c.DLQSources} {
		for i := range list {
			resolved, err := resolvePluginSecrets(list[i].Config, func(p string) (string, error) {
				return readSecretFile(c.resolvePath(p))
			}, fmt.Sprintf("%s.%d.config", kind, i), r)
			if err == nil {
				list[i].resolved = resolved
			}
		}
	}
}

func resolvePluginSecrets(m map[string]any, read func(string) (string, error), key string, r *reporter) (map[string]any, error) {
	out := make(map[string]any, len(m))
	var failed bool
	for k, v := range m {
		if strings.HasSuffix(k, "_file") {
			if p, ok := v.(string); ok && p != "" {
				s, err := read(p)
				if err != nil {
					r.at(key+"."+k, "%v", err)
					failed = true
					continue
				}
				out[strings.TrimSuffix(k, "_file")] = s
				continue
			}
		}
		if sub, ok := v.(map[string]any); ok {
			res, err := resolvePluginSecrets(sub, read, key+"."+k, r)
			if err != nil {
				failed = true
				continue
			}
			out[k] = res
			continue
		}
		out[k] = v
	}
	if failed {
		return nil, errors.New("secret file problems")
	}
	return out, nil
}

func readSecretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("cannot read secret file: %w", err)
	}
	// Editors and `echo` add a trailing newline that is never part of a secret.
	return strings.TrimRight(string(b), "\r\n"), nil
}

// resolvePath anchors a relative path at the config file's directory, so the
// daemon behaves the same whatever its working directory.
func (c *Config) resolvePath(p string) string {
	if p == "" || filepath.IsAbs(p) || c.Dir == "" {
		return p
	}
	return filepath.Join(c.Dir, p)
}

// ResolvePath is resolvePath for other packages (plugin_dir, socket path).
func (c *Config) ResolvePath(p string) string { return c.resolvePath(p) }
