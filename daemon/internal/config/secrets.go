package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

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
