package ledger

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/receipt"
)

// FileType and FileVersion name the ledger file format.
const (
	FileType    = "lifecycled.erasure-ledger"
	FileVersion = 1
)

// File is a ledger file: every entry, signed like a receipt (Ed25519 over
// the RFC 8785 form of every member but "signature") with the daemon's
// receipt key. Its type differs from a receipt's, so that neither passes
// for the other.
type File struct {
	Type       string         `json:"type"`
	Version    int            `json:"version"`
	ExportedAt string         `json:"exported_at"`
	Daemon     receipt.Daemon `json:"daemon"`
	KeyID      string         `json:"key_id"`
	EntryCount int            `json:"entry_count"`
	Entries    []FileEntry    `json:"entries"`
	Signature  string         `json:"signature,omitempty"`
}

// FileEntry is one erasure in a ledger file.
type FileEntry struct {
	TenantID      string `json:"tenant_id"`
	JobID         string `json:"job_id"`
	ErasedAt      string `json:"erased_at"`
	ReceiptSHA256 string `json:"receipt_sha256"`
}

// Signer signs ledger files: the daemon's receipt key.
type Signer interface {
	KeyID() string
	// SignJSON returns v signed, in its RFC 8785 form with a "signature" member.
	SignJSON(v any) ([]byte, error)
}

// Encode signs entries as a ledger file.
func Encode(entries []Entry, exportedAt time.Time, daemon receipt.Daemon, s Signer) ([]byte, error) {
	f := File{Type: FileType, Version: FileVersion, ExportedAt: deletion.FormatTime(exportedAt), Daemon: daemon,
		KeyID: s.KeyID(), EntryCount: len(entries), Entries: make([]FileEntry, 0, len(entries))}
	sorted := append([]Entry(nil), entries...)
	sort.Slice(sorted, func(i, j int) bool {
		if !sorted[i].ErasedAt.Equal(sorted[j].ErasedAt) {
			return sorted[i].ErasedAt.Before(sorted[j].ErasedAt)
		}
		return sorted[i].JobID.String() < sorted[j].JobID.String()
	})
	for _, e := range sorted {
		f.Entries = append(f.Entries, FileEntry{TenantID: e.TenantID, JobID: e.JobID.String(),
			ErasedAt: deletion.FormatTime(e.ErasedAt), ReceiptSHA256: e.ReceiptSHA256})
	}
	return s.SignJSON(f)
}

// Report is what Verify found; Valid only when every check passed.
type Report struct {
	Valid  bool            `json:"valid"`
	Checks []receipt.Check `json:"checks"`
	File   *File           `json:"-"`
	// Entries are the file's entries, parsed, when the file is valid.
	Entries []Entry `json:"-"`
	// Failed names the first failed check's kind: ErrInvalidFile or ErrKeyUnknown.
	Failed error `json:"-"`
}

func (r *Report) add(name string, ok bool, format string, args ...any) bool {
	r.Checks = append(r.Checks, receipt.Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
	if !ok && r.Failed == nil {
		r.Failed = ErrInvalidFile
	}
	return ok
}

// Err is nil for a valid file, else an error that says what failed and
// matches ErrInvalidFile or ErrKeyUnknown (and derrors.ErrInvalid).
func (r *Report) Err() error {
	if r.Valid {
		return nil
	}
	for _, c := range r.Checks {
		if !c.OK {
			return &fileError{kind: r.Failed, msg: fmt.Sprintf("the ledger file does not verify: %s: %s", c.Name, c.Detail)}
		}
	}
	return &fileError{kind: ErrInvalidFile, msg: "the ledger file does not verify"}
}

var receiptHashRE = regexp.MustCompile(`^(sha256:[0-9a-f]{64})?$`)

// TenantCheck says whether a tenant id of a file is one the importing
// daemon accepts as it is (its canonical spelling); nil accepts any
// non-empty id (an offline check that does not know the daemon's format).
type TenantCheck func(id string) error

// CanonicalIn is the TenantCheck of daemon.tenant_id_format format.
func CanonicalIn(format string) TenantCheck {
	return func(id string) error {
		c, err := deletion.CanonicalTenantID(id, format)
		if err != nil {
			return err
		}
		if c != id {
			return fmt.Errorf("not in its canonical spelling %q", c)
		}
		return nil
	}
}

// Verify checks a ledger file: one strict JSON object of this type and
// version, signed by the key keys resolves for its key_id, and entries that
// are well formed (tenant ids that tenant accepts, UUID job ids, each
// once, RFC 3339 times, receipt hashes) and as many as entry_count says.
func Verify(data []byte, keys receipt.KeyResolver, tenant TenantCheck) Report {
	var r Report
	obj, checks := receipt.ParseObject(data)
	for _, c := range checks {
		r.add(c.Name, c.OK, "%s", c.Detail)
	}
	if obj == nil {
		return r
	}
	var f File
	if err := json.Unmarshal(data, &f); err != nil {
		r.add("form", false, "not a ledger file: %v", err)
		return r
	}
	for _, k := range []string{"type", "version", "exported_at", "daemon", "key_id", "entry_count", "entries", "signature"} {
		if _, ok := obj[k]; !ok {
			r.add("form", false, "no %q member: not a %s version %d file", k, FileType, FileVersion)
			return r
		}
	}
	if f.Type != FileType || f.Version != FileVersion {
		r.add("form", false, "type %q version %d: not a %s version %d file", f.Type, f.Version, FileType, FileVersion)
		return r
	}
	r.add("form", true, "a %s, version %d, exported %s, %d entries", FileType, FileVersion, f.ExportedAt, len(f.Entries))
	r.File = &f

	pub, from, err := keys(f.KeyID)
	if err != nil {
		r.add("key", false, "the key the file names (%s): %v", f.KeyID, err)
		r.Failed = ErrKeyUnknown
		return r
	}
	if got := receipt.KeyID(pub); got != f.KeyID {
		r.add("key", false, "the key from %s is %s, but the file names %s", from, got, f.KeyID)
		r.Failed = ErrKeyUnknown
		return r
	}
	r.add("key", true, "Ed25519 public key %s from %s is the one the file names", f.KeyID, from)

	valid, signed, problem := receipt.VerifySignature(pub, f.Signature, obj)
	if problem != "" {
		r.add("signature", false, "%s", problem)
		return r
	}
	detail := fmt.Sprintf("Ed25519 signature over the RFC 8785 form (%d bytes) of every member but \"signature\"", signed)
	if !valid {
		detail += " does NOT match: the file was changed after signing, or another key signed it"
	}
	if !r.add("signature", valid, "%s", detail) {
		return r
	}
	entries, problem := parseEntries(&f, tenant)
	if !r.add("entries", problem == "", "%s", orOK(problem, fmt.Sprintf("%d entries, each well formed, no job twice", len(entries)))) {
		return r
	}
	r.Entries, r.Valid, r.Failed = entries, true, nil
	return r
}

func parseEntries(f *File, check TenantCheck) ([]Entry, string) {
	if f.EntryCount != len(f.Entries) {
		return nil, fmt.Sprintf("entry_count is %d but the file holds %d entries", f.EntryCount, len(f.Entries))
	}
	seen := make(map[uuid.UUID]bool, len(f.Entries))
	out := make([]Entry, 0, len(f.Entries))
	for i, e := range f.Entries {
		id, err := uuid.Parse(e.JobID)
		if err != nil || len(e.JobID) != 36 {
			return nil, fmt.Sprintf("entries[%d]: job_id %q is not a UUID", i, e.JobID)
		}
		if seen[id] {
			return nil, fmt.Sprintf("entries[%d]: job %s appears twice", i, id)
		}
		seen[id] = true
		if e.TenantID == "" {
			return nil, fmt.Sprintf("entries[%d]: tenant_id is empty", i)
		}
		if check != nil {
			if err := check(e.TenantID); err != nil {
				return nil, fmt.Sprintf("entries[%d]: tenant_id %q does not fit daemon.tenant_id_format: %v", i, e.TenantID, err)
			}
		}
		at, err := time.Parse(time.RFC3339Nano, e.ErasedAt)
		if err != nil {
			return nil, fmt.Sprintf("entries[%d]: erased_at %q is not an RFC 3339 time", i, e.ErasedAt)
		}
		if !receiptHashRE.MatchString(e.ReceiptSHA256) {
			return nil, fmt.Sprintf("entries[%d]: receipt_sha256 %q is not \"sha256:\" and 64 hex digits", i, e.ReceiptSHA256)
		}
		out = append(out, Entry{TenantID: e.TenantID, JobID: id, ErasedAt: at.UTC(), ReceiptSHA256: e.ReceiptSHA256, Source: SourceImport})
	}
	return out, ""
}

func orOK(problem, ok string) string {
	if problem != "" {
		return problem
	}
	return ok
}
