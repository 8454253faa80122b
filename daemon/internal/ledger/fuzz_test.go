package ledger_test

import (
	"crypto/ed25519"
	"testing"

	"github.com/lifecycled/lifecycled/daemon/internal/ledger"
	"github.com/lifecycled/lifecycled/daemon/internal/receipt"
)

// FuzzVerify: Verify reads whatever an import receives without panicking,
// and a file it calls valid holds exactly entry_count well-formed entries.
func FuzzVerify(f *testing.F) {
	// A fixed key, so that mutations of a valid file keep meeting the
	// signature check with the same key.
	n := receipt.NewNotary(ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)), "fuzz", nil)
	valid, err := ledger.Encode(sampleEntries(), t0, receipt.Daemon{ID: "fuzz"}, n)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add([]byte(`{"type":"lifecycled.erasure-ledger","version":1,"entries":[]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rep := ledger.Verify(data, keysOf(n), ledger.CanonicalIn("uuid"))
		if !rep.Valid {
			if rep.Err() == nil {
				t.Fatal("invalid without an error")
			}
			return
		}
		if len(rep.Entries) != rep.File.EntryCount {
			t.Fatalf("valid with %d entries, entry_count %d", len(rep.Entries), rep.File.EntryCount)
		}
		for _, e := range rep.Entries {
			if e.TenantID == "" || e.Source != ledger.SourceImport {
				t.Fatalf("bad entry %+v", e)
			}
		}
	})
}
