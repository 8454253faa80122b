package config

import (
	"bytes"
	_ "embed"
	"net/url"

	"github.com/BurntSushi/toml"

	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/host"
)

// Redacted replaces secret values in dumps.
const Redacted = host.Redacted

// IsSecretKey reports whether a config key holds a secret by its name (the
// one rule, shared with the plugins' scrubber).
func IsSecretKey(k string) bool { return sdk.IsSecretKey(k) }

// RedactURL hides every secret a DSN can carry: the password in a URL's
// user info (parsed, so percent-encoded ones too), and through the SDK's
// scrubber query parameters (?password=, ?sslpassword=), key=value pairs
// (host=db password=...) and driver DSNs (user:pw@tcp(...)).
func RedactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), Redacted)
			s = u.String()
		}
	}
	return host.ScrubText(s)
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

// RedactMap returns a copy of m with secret values replaced, recursively
// through tables and lists.
func RedactMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = redactValue(IsSecretKey(k), v)
	}
	return out
}

func redactValue(secret bool, v any) any {
	switch x := v.(type) {
	case map[string]any:
		return RedactMap(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = redactValue(secret, e)
		}
		return out
	case []map[string]any:
		out := make([]map[string]any, len(x))
		for i, e := range x {
			out[i] = RedactMap(e)
		}
		return out
	case string:
		if secret {
			return Redacted
		}
		return RedactURL(x)
	default:
		if secret {
			return Redacted
		}
		return v
	}
}

//go:embed default.toml
var defaultTOML string

// DefaultTOML is the commented config for a packaged install, printed by
// `lifecycled config default`.
func DefaultTOML() string { return defaultTOML }
