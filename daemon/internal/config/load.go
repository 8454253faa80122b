package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
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
func Load(path string) (*Config, error) { return LoadWith(path, ParseOptions{}) }

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
