package scrub

import (
	"strings"
	"testing"
)

// A password inside a connection string in any config value is a secret
// wherever it shows up later, not only where it still looks like part of a
// DSN: drivers repeat it in their own words. go-sql-driver's DSN allows '@'
// and '/' in the password (the address starts at the last "@tcp(").
func TestDSNPasswordsInConfigAreSecrets(t *testing.T) {
	s := &Scrubber{}
	s.AddFromConfig(map[string]any{
		"dsn":   "app:p@ss/w0rd@tcp(db:3306)/app",
		"url":   "postgres://u:se%40cret@h/db",
		"conns": []any{"host=db user=x password='kv pass 9'"},
	})
	for _, text := range []string{
		"dsn app:p@ss/w0rd@tcp(db:3306)/app failed",
		"auth failed for app (password p@ss/w0rd)",
		"url postgres://u:se%40cret@h/db", "connecting with se@cret",
		"libpq: kv pass 9 rejected",
	} {
		got := s.Scrub(text)
		for _, secret := range []string{"p@ss/w0rd", "ss/w0rd", "se@cret", "se%40cret", "kv pass 9"} {
			if strings.Contains(got, secret) {
				t.Errorf("Scrub(%q) = %q: holds %q", text, got, secret)
			}
		}
	}
	if got := Text("open app:p@ss/w0rd@tcp(db:3306)/app: refused"); strings.Contains(got, "w0rd") {
		t.Errorf("Text left the password of a driver DSN with '@' in it: %q", got)
	}
}
