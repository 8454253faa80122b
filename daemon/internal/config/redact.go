package config

import (
	"bytes"
	_ "embed"
	"net/url"
	"regexp"
	"strings"

	"github.com/BurntSushi/toml"
)

// Redacted replaces secret values in dumps.
const Redacted = "REDACTED"

var secretKeyRE = regexp.MustCompile(`(?i)(password|passwd|secret|token|credential|api_?key|private_key|access_key|session_key|sasl_pass)`)

// IsSecretKey reports whether a config key holds a secret by its name.
func IsSecretKey(k string) bool {
	if strings.HasSuffix(k, "_file") {
		return false // a path, not the secret itself
	}
	return secretKeyRE.MatchString(k)
}

var urlPasswordRE = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*):[^@\s]*@`)

// RedactURL hides the password of any URL with user info inside s.
func RedactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), Redacted)
			return u.String()
		}
		return s
	}
	return urlPasswordRE.ReplaceAllString(s, "${1}:"+Redacted+"@")
}

// Dump renders the effective config as TOML with every secret redacted.
func Dump(c *Config) (string, error) {
	cp := *c
	cp.Daemon.State = RedactURL(cp.Daemon.State)
	cp.Deleters = redactInstances(c.Deleters)
	cp.DLQSources = redactInstances(c.DLQSources)
	var buf bytes.Buffer
	enc := toml.NewEncoder(&buf)
	enc.Indent = ""
	if err := enc.Encode(cp); err != nil {
		return "", err
	}
	return buf.String(), nil
}

func redactInstances(in []PluginInstance) []PluginInstance {
	out := make([]PluginInstance, len(in))
	for i, p := range in {
		p.Config = RedactMap(p.Config)
		p.resolved = nil
		out[i] = p
	}
	return out
}

// RedactMap returns a copy of m with secret values replaced, recursively.
func RedactMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch x := v.(type) {
		case map[string]any:
			out[k] = RedactMap(x)
		case string:
			if IsSecretKey(k) {
				out[k] = Redacted
			} else {
				out[k] = RedactURL(x)
			}
		default:
			if IsSecretKey(k) {
				out[k] = Redacted
			} else {
				out[k] = v
			}
		}
	}
	return out
}

//go:embed default.toml
var defaultTOML string

// DefaultTOML is the commented config for a packaged install, printed by
// `lifecycled config default`.
func DefaultTOML() string { return defaultTOML }
