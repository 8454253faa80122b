package plugintest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/lifecycled/lifecycled/sdk"
)

// secret is a value that must never leave the plugin, and where the kit
// found it.
type secret struct {
	value, where string
}

// secretSet collects the secrets of every config the kit sends.
type secretSet struct {
	mu   sync.Mutex
	list []secret
}

func (s *secretSet) add(value, where string) {
	// The SDK ignores shorter values too: scrubbing them would mangle text.
	if len(value) < 4 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range s.list {
		if x.value == value {
			return
		}
	}
	s.list = append(s.list, secret{value, where})
}

func (s *secretSet) all() []secret {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]secret(nil), s.list...)
}

// addConfig finds the secrets in a config: the values of keys named like
// secrets (sdk.IsSecretKey) and the passwords inside connection strings in
// any value (URL user info, go-sql-driver's user:password@tcp(...),
// key=value password=...).
func (s *secretSet) addConfig(cfg map[string]any, where string) {
	for k, v := range cfg {
		s.addValue(v, where+"."+k, sdk.IsSecretKey(k))
	}
}

func (s *secretSet) addValue(v any, where string, secretKey bool) {
	switch x := v.(type) {
	case string:
		if secretKey {
			s.add(x, where)
		}
		for _, pw := range dsnPasswords(x) {
			s.add(pw, "the password in "+where)
		}
	case map[string]any:
		for k, e := range x {
			s.addValue(e, where+"."+k, secretKey || sdk.IsSecretKey(k))
		}
	case []any:
		for i, e := range x {
			s.addValue(e, fmt.Sprintf("%s[%d]", where, i), secretKey)
		}
	}
}

var (
	// go-sql-driver/mysql: [user[:password]@][net[(addr)]]/dbname; the
	// password may hold '@', so the address starts at the last "@net(".
	driverDSNAt = regexp.MustCompile(`@(?:tcp|tcp6|unix|udp|udp6)\(`)
	kvPassword  = regexp.MustCompile(`(?i)(?:^|[\s;?&])(?:password|pwd|sslpassword)\s*=\s*('(?:[^'\\]|\\.)*'|"[^"]*"|[^\s;&]+)`)
)

// dsnPasswords returns the passwords a connection string holds, in the
// forms a plugin might print them (as written and decoded).
func dsnPasswords(s string) []string {
	var out []string
	if i := strings.Index(s, "://"); i > 0 {
		if u, err := url.Parse(s); err == nil && u.User != nil {
			if pw, ok := u.User.Password(); ok {
				out = append(out, pw)
				// As written, percent-encoding kept.
				auth := s[i+3:]
				if end := strings.IndexAny(auth, "/?#"); end >= 0 {
					auth = auth[:end]
				}
				if at := strings.LastIndex(auth, "@"); at > 0 {
					if _, raw, ok := strings.Cut(auth[:at], ":"); ok {
						out = append(out, raw)
					}
				}
			}
		}
	}
	if locs := driverDSNAt.FindAllStringIndex(s, -1); len(locs) > 0 && !strings.Contains(s, "://") {
		cred := s[:locs[len(locs)-1][0]]
		if _, pw, ok := strings.Cut(cred, ":"); ok {
			out = append(out, pw)
		}
	}
	for _, m := range kvPassword.FindAllStringSubmatch(s, -1) {
		out = append(out, strings.Trim(m[1], `'"`))
	}
	var uniq []string
	for _, pw := range out {
		if pw != "" && !slices.Contains(uniq, pw) {
			uniq = append(uniq, pw)
		}
	}
	return uniq
}

// recorder is the plugin's TenantDeleter, remembering the text of every
// error it returned, for the secret check.
type recorder struct {
	d    sdk.TenantDeleter
	mu   sync.Mutex
	errs []string
}

func (r *recorder) note(call string, err error) {
	if err == nil {
		return
	}
	r.mu.Lock()
	r.errs = append(r.errs, call+": "+err.Error())
	r.mu.Unlock()
}

func (r *recorder) errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

func (r *recorder) Configure(ctx context.Context, req *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	resp, err := r.d.Configure(ctx, req)
	r.note("Configure", err)
	if resp != nil {
		for _, w := range resp.Warnings {
			r.note("Configure warning", fmt.Errorf("%s", w))
		}
	}
	return resp, err
}

// Health calls the plugin's Health (Unsupported when its client has none).
func (r *recorder) Health(ctx context.Context) error {
	hc, ok := r.d.(sdk.HealthChecker)
	if !ok {
		return sdk.Unsupported(errors.New("the client has no Health"))
	}
	err := hc.Health(ctx)
	if !errors.Is(err, sdk.ErrUnsupported) {
		r.note("Health", err)
	}
	return err
}

func (r *recorder) Count(ctx context.Context, req *sdk.CountRequest) (*sdk.CountResponse, error) {
	resp, err := r.d.Count(ctx, req)
	r.note(fmt.Sprintf("Count(%q)", req.TenantID), err)
	return resp, err
}

func (r *recorder) Delete(ctx context.Context, req *sdk.DeleteRequest, progress sdk.Progress) (*sdk.DeleteResponse, error) {
	resp, err := r.d.Delete(ctx, req, progress)
	r.note(fmt.Sprintf("Delete(%q)", req.TenantID), err)
	return resp, err
}

// recordOptional passes on a call of the optional interface I, named iface
// (sdk.Planner, sdk.Verifier), and records its error; a deleter without I
// answers Unsupported, as the gRPC server does.
func recordOptional[I, R any](r *recorder, method, tenant, iface string, fn func(I) (R, error)) (R, error) {
	i, ok := r.d.(I)
	if !ok {
		var zero R
		return zero, sdk.Unsupported(errors.New("the deleter is not an " + iface))
	}
	resp, err := fn(i)
	r.note(fmt.Sprintf("%s(%q)", method, tenant), err)
	return resp, err
}

// noSecrets looks for every secret in every error the plugin returned and
// in everything it wrote to stderr.
func (k *kit) noSecrets(t *testing.T) {
	secrets := k.secrets.all()
	if h, ok := k.o.Fixture.(SecretHolder); ok {
		for _, s := range h.Secrets(t) {
			if len(s) >= 4 {
				secrets = append(secrets, secret{s, "the fixture's Secrets"})
			}
		}
	}
	if len(secrets) == 0 {
		t.Skip("no config the kit sent held a secret: put a password in the fixture's Config or UnreachableConfig " +
			"(in the DSN; the store may ignore it) so that the kit can check it never leaves the plugin")
	}
	type text struct{ where, body string }
	var texts []text
	for _, e := range k.d.errors() {
		texts = append(texts, text{"the error of " + e[:strings.Index(e, ":")], e})
	}
	for _, line := range strings.Split(k.p.Stderr(), "\n") {
		texts = append(texts, text{"the plugin's stderr", line})
	}
	found := map[string]bool{}
	for _, s := range secrets {
		for _, x := range texts {
			key := s.value + "\x00" + x.where
			if found[key] || !strings.Contains(x.body, s.value) {
				continue
			}
			found[key] = true
			t.Errorf("%s holds the secret from %s (%s): %q. Log through sdk.Logger() and return errors through the SDK, "+
				"which scrub config secrets and DSN passwords; register secrets the plugin obtains at run time with sdk.AddSecret; "+
				"give libraries that log to stderr themselves a scrubbed writer (sdk.Logger().StandardWriter) or silence them",
				x.where, s.where, mask(s.value), strings.ReplaceAll(x.body, s.value, mask(s.value)))
		}
	}
	sort.Slice(secrets, func(i, j int) bool { return secrets[i].where < secrets[j].where })
	var where []string
	for _, s := range secrets {
		where = append(where, s.where)
	}
	t.Logf("looked for %d secrets (%s) in %d errors and the plugin's stderr", len(secrets), strings.Join(where, ", "), len(k.d.errors()))
}

// mask shows a secret's first two bytes only.
func mask(s string) string {
	if len(s) <= 2 {
		return "***"
	}
	return s[:2] + strings.Repeat("*", 6)
}
