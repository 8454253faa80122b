package ledger_test

import (
	"bytes"
	"crypto/ed25519"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/ledger"
	"github.com/lifecycled/lifecycled/daemon/internal/receipt"
)

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func newNotary(t *testing.T) *receipt.Notary {
	t.Helper()
	key, err := receipt.GenerateKey(filepath.Join(t.TempDir(), "key.pem"))
	require.NoError(t, err)
	return receipt.NewNotary(key, "test-daemon", func() map[string]receipt.Plugin { return nil })
}

func keysOf(n *receipt.Notary) receipt.KeyResolver {
	return func(string) (ed25519.PublicKey, string, error) { return n.PublicKey(), "the test", nil }
}

func sampleEntries() []ledger.Entry {
	return []ledger.Entry{
		{TenantID: uuid.NewString(), JobID: uuid.New(), ErasedAt: t0.Add(time.Hour), ReceiptSHA256: ledger.ReceiptHash([]byte("a"))},
		{TenantID: uuid.NewString(), JobID: uuid.New(), ErasedAt: t0, ReceiptSHA256: ""},
		{TenantID: uuid.NewString(), JobID: uuid.New(), ErasedAt: t0.Add(time.Minute), ReceiptSHA256: ledger.ReceiptHash([]byte("c"))},
	}
}

func TestLedgerFileRoundTrip(t *testing.T) {
	n := newNotary(t)
	in := sampleEntries()
	data, err := ledger.Encode(in, t0.Add(2*time.Hour), receipt.Daemon{ID: "d1"}, n)
	require.NoError(t, err)
	rep := ledger.Verify(data, keysOf(n), ledger.CanonicalIn("uuid"))
	require.True(t, rep.Valid, "%+v", rep.Checks)
	require.NoError(t, rep.Err())
	require.Len(t, rep.Entries, 3)
	require.Equal(t, in[1].JobID, rep.Entries[0].JobID, "oldest first")
	for _, e := range rep.Entries {
		require.Equal(t, ledger.SourceImport, e.Source)
	}
	byJob := map[uuid.UUID]ledger.Entry{}
	for _, e := range in {
		byJob[e.JobID] = e
	}
	for _, e := range rep.Entries {
		want := byJob[e.JobID]
		require.Equal(t, want.TenantID, e.TenantID)
		require.True(t, want.ErasedAt.Equal(e.ErasedAt))
		require.Equal(t, want.ReceiptSHA256, e.ReceiptSHA256)
	}
	// Laid out anew, the content is still as signed.
	var buf bytes.Buffer
	require.NoError(t, jsonIndent(&buf, data))
	require.True(t, ledger.Verify(buf.Bytes(), keysOf(n), nil).Valid)
	// An empty ledger exports and verifies too.
	empty, err := ledger.Encode(nil, t0, receipt.Daemon{}, n)
	require.NoError(t, err)
	require.True(t, ledger.Verify(empty, keysOf(n), nil).Valid)
}

// TestLedgerFileTampering: every change after signing fails, naming the
// check, with the error a route maps to its code.
func TestLedgerFileTampering(t *testing.T) {
	n, other := newNotary(t), newNotary(t)
	in := sampleEntries()
	data, err := ledger.Encode(in, t0, receipt.Daemon{ID: "d1"}, n)
	require.NoError(t, err)
	victim := in[0].TenantID
	sub := func(re, repl string) []byte {
		return regexp.MustCompile(re).ReplaceAll(data, []byte(repl))
	}
	// A receipt signed by the same key is not a ledger.
	job := &deletion.Job{ID: uuid.New(), TenantID: uuid.NewString(), Status: deletion.JobCompleted, Verified: true, CreatedAt: t0,
		Deleters: []deletion.DeleterState{{Name: "pg", Status: deletion.DeleterSucceeded, DeletedCount: 1, Verification: &deletion.Verification{}}}}
	rec, err := n.Issue(job, t0)
	require.NoError(t, err)
	otherSigned, err := ledger.Encode(in, t0, receipt.Daemon{ID: "d1"}, other)
	require.NoError(t, err)

	tests := map[string]struct {
		data  []byte
		keys  receipt.KeyResolver
		check string
		want  error
	}{
		"tenant id changed":     {bytes.Replace(data, []byte(victim), []byte(uuid.NewString()), 1), keysOf(n), "signature", ledger.ErrInvalidFile},
		"entry removed":         {sub(`,?\{"erased_at":"[^"]*","job_id":"`+in[0].JobID.String()+`","receipt_sha256":"[^"]*","tenant_id":"[^"]*"\}`, ""), keysOf(n), "signature", ledger.ErrInvalidFile},
		"time changed":          {bytes.Replace(data, []byte("2026-11-01T12:00:00"), []byte("2026-11-01T12:00:01"), 1), keysOf(n), "signature", ledger.ErrInvalidFile},
		"signature removed":     {sub(`,"signature":"[^"]*"`, ""), keysOf(n), "form", ledger.ErrInvalidFile},
		"cut short":             {data[:len(data)/2], keysOf(n), "json", ledger.ErrInvalidFile},
		"a receipt, not ledger": {rec.Body, keysOf(n), "form", ledger.ErrInvalidFile},
		"another key signed it": {otherSigned, keysOf(n), "key", ledger.ErrKeyUnknown},
		"the key is unknown":    {data, func(string) (ed25519.PublicKey, string, error) { return nil, "", errNoKey }, "key", ledger.ErrKeyUnknown},
		"a member twice":        {bytes.Replace(data, []byte(`{"daemon"`), []byte(`{"type":"x","daemon"`), 1), keysOf(n), "json", ledger.ErrInvalidFile},
		"not an object":         {[]byte(`[1,2]`), keysOf(n), "form", ledger.ErrInvalidFile},
		"signature not base64":  {sub(`"signature":"[^"]*"`, `"signature":"%%%"`), keysOf(n), "signature", ledger.ErrInvalidFile},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rep := ledger.Verify(tc.data, tc.keys, nil)
			require.False(t, rep.Valid)
			last := rep.Checks[len(rep.Checks)-1]
			require.False(t, last.OK)
			require.Equal(t, tc.check, last.Name, "%+v", rep.Checks)
			require.ErrorIs(t, rep.Err(), tc.want)
			require.Nil(t, rep.Entries)
		})
	}
}

// TestLedgerFileEntriesChecked: a correctly signed file with bad entries
// (a key holder's mistake, not a tamper) is refused too.
func TestLedgerFileEntriesChecked(t *testing.T) {
	n := newNotary(t)
	good := sampleEntries()[0]
	tests := map[string]struct {
		f    ledger.File
		want string
	}{
		"count disagrees": {ledger.File{EntryCount: 2, Entries: []ledger.FileEntry{fileEntry(good)}}, "entry_count is 2"},
		"job twice":       {ledger.File{EntryCount: 2, Entries: []ledger.FileEntry{fileEntry(good), fileEntry(good)}}, "appears twice"},
		"job not a uuid": {ledger.File{EntryCount: 1, Entries: []ledger.FileEntry{func() ledger.FileEntry {
			e := fileEntry(good)
			e.JobID = "42"
			return e
		}()}}, "is not a UUID"},
		"upper-case tenant": {ledger.File{EntryCount: 1, Entries: []ledger.FileEntry{func() ledger.FileEntry {
			e := fileEntry(good)
			e.TenantID = "A" + e.TenantID[1:]
			return e
		}()}}, "canonical spelling"},
		"bad hash": {ledger.File{EntryCount: 1, Entries: []ledger.FileEntry{func() ledger.FileEntry {
			e := fileEntry(good)
			e.ReceiptSHA256 = "md5:00"
			return e
		}()}}, "receipt_sha256"},
		"bad time": {ledger.File{EntryCount: 1, Entries: []ledger.FileEntry{func() ledger.FileEntry {
			e := fileEntry(good)
			e.ErasedAt = "yesterday"
			return e
		}()}}, "erased_at"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := tc.f
			f.Type, f.Version, f.ExportedAt, f.KeyID = ledger.FileType, ledger.FileVersion, deletion.FormatTime(t0), n.KeyID()
			data, err := n.SignJSON(f)
			require.NoError(t, err)
			rep := ledger.Verify(data, keysOf(n), ledger.CanonicalIn("uuid"))
			require.False(t, rep.Valid)
			require.Equal(t, "entries", rep.Checks[len(rep.Checks)-1].Name)
			require.Contains(t, rep.Checks[len(rep.Checks)-1].Detail, tc.want)
			require.ErrorIs(t, rep.Err(), ledger.ErrInvalidFile)
		})
	}
}

func fileEntry(e ledger.Entry) ledger.FileEntry {
	return ledger.FileEntry{TenantID: e.TenantID, JobID: e.JobID.String(), ErasedAt: deletion.FormatTime(e.ErasedAt), ReceiptSHA256: e.ReceiptSHA256}
}
