package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/lifecycled/lifecycled/sdk/plugintest"
)

// fixture seeds tenants as files under a temporary root and counts them
// with the file system, not with the plugin.
type fixture struct{ root string }

// StopStore takes the root away (as an unmounted volume would) and
// StartStore puts it back with its files.
func (f *fixture) StopStore(t testing.TB) {
	if err := os.Rename(f.root, f.root+".away"); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) StartStore(t testing.TB) {
	if err := os.Rename(f.root+".away", f.root); err != nil {
		t.Fatal(err)
	}
}

// UnreachableConfig points at a directory that does not exist.
func (f *fixture) UnreachableConfig(testing.TB) (map[string]any, string) {
	return map[string]any{"root": filepath.Join(f.root, "not-mounted")}, "root"
}

func (f *fixture) Config(testing.TB) map[string]any { return map[string]any{"root": f.root} }

func (f *fixture) dir(tenant string) string {
	return filepath.Join(f.root, "t-"+url.PathEscape(tenant))
}

func (f *fixture) Seed(t testing.TB, tenant string, n int) int64 {
	for i := 0; i < n; i++ {
		sub := filepath.Join(f.dir(tenant), fmt.Sprintf("batch-%d", i%10))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("file-%d", i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return int64(n)
}

func (f *fixture) Remaining(t testing.TB, tenant string) int64 {
	var n int64
	_ = filepath.WalkDir(f.dir(tenant), func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			n++
		}
		return nil
	})
	return n
}

// Checksum hashes the tenant's file names and contents, so the kit sees any
// file of a bystander tenant deleted, added or changed.
func (f *fixture) Checksum(t testing.TB, tenant string) string {
	h := sha256.New()
	err := filepath.WalkDir(f.dir(tenant), func(p string, e os.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return filepath.SkipAll
			}
			return err
		}
		if e.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%q %x\n", p, sha256.Sum256(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestConformance(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "lifecycled-plugin-filestore")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	// With UUIDs, and with a format that accepts almost anything, so that
	// the kit also seeds bystander tenants whose ids differ from tenant A's
	// only in case, by a suffix such as "/x" or ":x", or by a space.
	for name, format := range map[string]string{"uuid": "uuid", "permissive": `^.{1,200}$`} {
		t.Run(name, func(t *testing.T) {
			plugintest.RunTenantDeleter(t, plugintest.DeleterOptions{
				Binary:         bin,
				Fixture:        &fixture{root: t.TempDir()},
				TenantIDFormat: format,
				BadConfigs: map[string]map[string]any{
					"missing root":  {},
					"relative root": {"root": "uploads"},
					"unknown key":   {"root": "/tmp", "rooot": "/x"},
				},
				CancelSeed: 30000,
			})
		})
	}
}
