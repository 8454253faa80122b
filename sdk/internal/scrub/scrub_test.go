package scrub

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestScrubber(t *testing.T) {
	s := &Scrubber{}
	s.AddFromConfig(map[string]any{"password": "hunter2-pw", "nested": map[string]any{"sasl_password": "s4sl-secret"}, "addr": "10.0.0.1:6379",
		"listed": []any{map[string]any{"token": "l1sted-token"}}})
	s.Add("abc") // too short to scrub safely
	tests := map[string]struct{ in, want string }{
		"registered secret":    {"auth failed for hunter2-pw", "auth failed for REDACTED"},
		"nested secret":        {"sasl s4sl-secret rejected", "sasl REDACTED rejected"},
		"secret in a list":     {"bad l1sted-token", "bad REDACTED"},
		"url password":         {"dial postgres://app:pa55@db:5432/app failed", "dial postgres://app:REDACTED@db:5432/app failed"},
		"keyword dsn":          {"host=db password=pa55 user=app", "host=db password=REDACTED user=app"},
		"quoted keyword":       {`password='a b c' host=x`, `password=REDACTED host=x`},
		"token pair":           {"token: eyJhbGciOi", "token: REDACTED"},
		"nothing secret":       {"connected to 10.0.0.1:6379 abc", "connected to 10.0.0.1:6379 abc"},
		"url without password": {"redis://db:6379/0", "redis://db:6379/0"},
		"url query password":   {"postgres://app@db/app?sslmode=require&password=pa55", "postgres://app@db/app?sslmode=require&password=REDACTED"},
		"passphrase pair":      {"key_passphrase=pa55w0rd host=x", "key_passphrase=REDACTED host=x"},
		"go-sql-driver dsn":    {"dial app:pa55@tcp(db:3306)/app failed", "dial app:REDACTED@tcp(db:3306)/app failed"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.want, s.Scrub(tc.in))
		})
	}
}

func FuzzScrubNeverLeaksRegisteredSecret(f *testing.F) {
	f.Add("prefix s3cr3t-value suffix", "s3cr3t-value")
	f.Fuzz(func(t *testing.T, text, secret string) {
		if len(secret) < 4 {
			return
		}
		s := &Scrubber{}
		s.Add(secret)
		out := s.Scrub(text + secret + text)
		if len(secret) >= 4 && containsFold(out, secret) && !containsFold(Redacted, secret) && !containsFold(text, secret) {
			t.Fatalf("secret %q survived in %q", secret, out)
		}
	})
}

func containsFold(s, sub string) bool {
	return len(sub) > 0 && len(s) >= len(sub) && (func() bool {
		for i := 0; i+len(sub) <= len(s); i++ {
			if s[i:i+len(sub)] == sub {
				return true
			}
		}
		return false
	})()
}
