// Package pythondeleter_test runs the conformance kit against the example
// plugin written in Python (plugin/), through the real go-plugin boundary,
// as the daemon runs it: the plugin is built into one zipapp file, started
// with no inherited environment, and reached over mutual TLS.
package pythondeleter_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/lifecycled/lifecycled/sdk/plugintest"
)

// python is Debian's interpreter, where python3-grpcio, python3-protobuf,
// python3-cryptography and python3-grpc-tools install; the plugin's
// "#!/usr/bin/env python3" finds it too, since plugins get no PATH and env
// falls back to /bin:/usr/bin.
const python = "/usr/bin/python3"

func needPython(t *testing.T) {
	t.Helper()
	out, err := exec.Command(python, "-c", "import grpc, google.protobuf, cryptography").CombinedOutput()
	if err != nil {
		t.Fatalf("the Python example needs python3-grpcio, python3-protobuf and python3-cryptography (make test-deps installs them): %v\n%s", err, out)
	}
}

// buildZipapp packs plugin/ into one executable file, which is what the
// daemon's sha256 would cover.
func buildZipapp(t *testing.T) string {
	t.Helper()
	needPython(t)
	out := filepath.Join(t.TempDir(), "lifecycled-plugin-sqlite.pyz")
	script := fmt.Sprintf(`import zipapp; zipapp.create_archive("plugin", %q, interpreter="/usr/bin/env python3", filter=lambda p: "__pycache__" not in p.parts)`, out)
	if b, err := exec.Command(python, "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("zipapp: %v\n%s", err, b)
	}
	return out
}

// fixture drives fixture.py, which reads and writes the SQLite file with
// Python's sqlite3.
type fixture struct {
	path string
	mu   sync.Mutex
	in   io.Writer
	out  *bufio.Scanner
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	cmd := exec.Command(python, "fixture.py")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		_ = cmd.Wait()
	})
	f := &fixture{path: filepath.Join(t.TempDir(), "notes.sqlite"), in: in, out: bufio.NewScanner(out)}
	f.call(t, map[string]any{"op": "create", "path": f.path})
	return f
}

func (f *fixture) call(t testing.TB, req map[string]any) map[string]any {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	b, _ := json.Marshal(req)
	if _, err := f.in.Write(append(b, '\n')); err != nil {
		t.Fatalf("fixture.py: %v", err)
	}
	if !f.out.Scan() {
		t.Fatalf("fixture.py ended: %v", f.out.Err())
	}
	var resp map[string]any
	if err := json.Unmarshal(f.out.Bytes(), &resp); err != nil {
		t.Fatalf("fixture.py answered %q: %v", f.out.Text(), err)
	}
	if e, ok := resp["error"]; ok {
		t.Fatalf("fixture.py %v: %v", req["op"], e)
	}
	return resp
}

func (f *fixture) Config(testing.TB) map[string]any {
	return map[string]any{"path": f.path, "batch_size": 200}
}

func (f *fixture) Seed(t testing.TB, tenant string, n int) int64 {
	return int64(f.call(t, map[string]any{"op": "seed", "tenant": tenant, "n": n})["n"].(float64))
}

func (f *fixture) Remaining(t testing.TB, tenant string) int64 {
	return int64(f.call(t, map[string]any{"op": "remaining", "tenant": tenant})["n"].(float64))
}

func (f *fixture) Checksum(t testing.TB, tenant string) string {
	return f.call(t, map[string]any{"op": "checksum", "tenant": tenant})["sum"].(string)
}

// StopStore moves the file away, as an unmounted volume would; StartStore
// puts it back.
func (f *fixture) StopStore(t testing.TB) {
	if err := os.Rename(f.path, f.path+".away"); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) StartStore(t testing.TB) {
	if err := os.Rename(f.path+".away", f.path); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) UnreachableConfig(testing.TB) (map[string]any, string) {
	return map[string]any{"path": f.path + ".missing"}, "path"
}

func TestConformance(t *testing.T) {
	bin := buildZipapp(t)
	for name, format := range map[string]string{"uuid": "uuid", "permissive": `^.{1,200}$`} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			plugintest.RunTenantDeleter(t, plugintest.DeleterOptions{
				Binary:         bin,
				Fixture:        f,
				TenantIDFormat: format,
				BadConfigs: map[string]map[string]any{
					"missing path":  {},
					"relative path": {"path": "notes.sqlite"},
					"bad table":     {"path": f.path, "table": "no such"},
					"unknown table": {"path": f.path, "table": "nope"},
					"no column":     {"path": f.path, "tenant_column": "org_id"},
					"bad batch":     {"path": f.path, "batch_size": 0},
					"unknown key":   {"path": f.path, "tabel": "items"},
				},
				BadConfigFields: map[string]string{
					"missing path": "path", "relative path": "path", "bad table": "table", "unknown table": "table",
					"no column": "tenant_column", "bad batch": "batch_size", "unknown key": "tabel",
				},
				CancelSeed: 20000,
			})
		})
	}
}

// TestGeneratedCodeIsCurrent regenerates plugin/gen and compares: the
// committed code must be what generate.sh makes from the .proto files.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	needPython(t)
	if _, err := exec.LookPath("protoc"); err != nil {
		t.Fatal("protoc is needed (Debian: protobuf-compiler; make test-deps installs it)")
	}
	dir := t.TempDir()
	if out, err := exec.Command("./generate.sh", dir).CombinedOutput(); err != nil {
		t.Fatalf("generate.sh: %v\n%s", err, out)
	}
	var stale []string
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		want, _ := os.ReadFile(p)
		got, err := os.ReadFile(filepath.Join("plugin", "gen", rel))
		if err != nil || !bytes.Equal(got, want) {
			stale = append(stale, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(stale) > 0 {
		t.Errorf("plugin/gen is stale (%v): run make proto-python and commit", stale)
	}
}
