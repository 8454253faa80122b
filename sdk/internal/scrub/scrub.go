// Package scrub removes secrets from text: what the plugin's end of the
// protocol (package sdk) does to every error and log line before it leaves
// the plugin process, and what the daemon (through sdk/host) does to a DSN
// before it prints one. One set of rules, so that both agree on what a
// secret looks like.
package scrub

import (
	"io"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// Redacted replaces secrets in errors and logs.
const Redacted = "REDACTED"

var secretKeyRE = regexp.MustCompile(`(?i)(password|passwd|passphrase|secret|token|credential|api_?key|private_key|access_key|session_key|sasl_pass)`)

// IsSecretKey reports whether a config key names a secret. Values of such
// keys are scrubbed from everything a plugin returns or logs.
func IsSecretKey(k string) bool {
	if strings.HasSuffix(k, "_file") {
		return false // a path, not the secret
	}
	return secretKeyRE.MatchString(k)
}

var (
	// scheme://user:password@host
	urlPasswordRE = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s"']*):([^@\s"']*)@`)
	// user:password@tcp(host:port)/db, go-sql-driver/mysql's DSN; the
	// password may hold '@' and '/', so it runs to the last "@tcp(".
	driverDSNRE = regexp.MustCompile(`([^\s:/@"'(]+):([^\s"']*)@((?:tcp|tcp6|unix|udp|udp6)\()`)
	// password=..., sslpassword=..., key_passphrase=..., token: ..., in
	// key/value DSNs, URL query strings and messages
	kvSecretRE = regexp.MustCompile(`(?i)\b(\w*(?:password|passwd|pwd|passphrase|secret|token|api[_-]?key|access[_-]?key)\s*[=:]\s*)("[^"]*"|'[^']*'|[^\s,;&"']+)`)
)

// Text removes URL passwords, driver DSN passwords and password=... style
// pairs from text, with no secrets registered.
func Text(text string) string { return (&Scrubber{}).Scrub(text) }

// Scrubber removes secrets from text.
type Scrubber struct {
	mu      sync.RWMutex
	secrets []string
}

// Add registers a secret value to remove wherever it appears. Values
// shorter than 4 bytes are ignored: scrubbing them would mangle ordinary text.
func (s *Scrubber) Add(secret string) {
	if len(secret) < 4 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.secrets {
		if v == secret {
			return
		}
	}
	s.secrets = append(s.secrets, secret)
	// Longest first, so that a secret containing another is removed whole.
	sort.Slice(s.secrets, func(i, j int) bool { return len(s.secrets[i]) > len(s.secrets[j]) })
}

// AddFromConfig registers the values of secret-named keys, recursively
// (tables and lists included).
func (s *Scrubber) AddFromConfig(cfg map[string]any) {
	for k, v := range cfg {
		s.addValue(IsSecretKey(k), v)
	}
}

func (s *Scrubber) addValue(secret bool, v any) {
	switch x := v.(type) {
	case string:
		if secret {
			s.Add(x)
		}
		// A password inside a connection string is a secret wherever it
		// shows up later, not only where it still looks like part of one:
		// drivers repeat it in their own words.
		for _, pw := range connPasswords(x) {
			s.Add(pw)
		}
	case map[string]any:
		s.AddFromConfig(x)
	case []any:
		for _, e := range x {
			s.addValue(secret, e)
		}
	}
}

var kvPasswordRE = regexp.MustCompile(`(?i)(?:^|[\s;?&])(?:password|pwd|sslpassword)\s*=\s*('(?:[^'\\]|\\.)*'|"[^"]*"|[^\s;&]+)`)

// connPasswords returns the passwords a connection string holds: a URL's
// user info (as written and decoded), go-sql-driver's user:password@tcp(...)
// and key=value password=....
func connPasswords(v string) []string {
	var out []string
	if i := strings.Index(v, "://"); i > 0 {
		auth := v[i+3:]
		if end := strings.IndexAny(auth, "/?#"); end >= 0 {
			auth = auth[:end]
		}
		if at := strings.LastIndex(auth, "@"); at > 0 {
			if _, raw, ok := strings.Cut(auth[:at], ":"); ok {
				out = append(out, raw)
				if dec, err := url.PathUnescape(raw); err == nil {
					out = append(out, dec)
				}
			}
		}
	} else if m := driverDSNRE.FindStringSubmatch(v); m != nil {
		out = append(out, m[2])
	}
	for _, m := range kvPasswordRE.FindAllStringSubmatch(v, -1) {
		out = append(out, strings.Trim(m[1], `'"`))
	}
	return out
}

// Scrub returns text without registered secrets, URL passwords or
// password=... pairs.
func (s *Scrubber) Scrub(text string) string {
	s.mu.RLock()
	for _, v := range s.secrets {
		text = strings.ReplaceAll(text, v, Redacted)
	}
	s.mu.RUnlock()
	text = urlPasswordRE.ReplaceAllString(text, "${1}:"+Redacted+"@")
	text = driverDSNRE.ReplaceAllString(text, "${1}:"+Redacted+"@${3}")
	return kvSecretRE.ReplaceAllString(text, "${1}"+Redacted)
}

// Writer returns a writer that scrubs each write before passing it on.
// hclog writes one log line per Write, so secrets are never split.
func (s *Scrubber) Writer(w io.Writer) io.Writer { return &scrubWriter{s: s, w: w} }

type scrubWriter struct {
	s *Scrubber
	w io.Writer
}

func (sw *scrubWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(sw.w, sw.s.Scrub(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
