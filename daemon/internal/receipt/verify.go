package receipt

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
)

// Check is one thing Verify checked.
type Check struct {
	Name   string `json:"check"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// Report is what Verify found. Valid only when every check passed; the
// checks after a failed one that needs it did not run.
type Report struct {
	Valid  bool      `json:"valid"`
	Checks []Check   `json:"checks"`
	Doc    *Document `json:"receipt,omitempty"`
}

// KeyResolver finds the public key named keyID and says where it came from.
type KeyResolver func(keyID string) (pub ed25519.PublicKey, from string, err error)

// Options shape Verify.
type Options struct {
	// AllowReformatted accepts a receipt whose JSON was laid out anew
	// (indented, members reordered): its content and signature still
	// verify, but it is not the file as issued.
	AllowReformatted bool
}

func (r *Report) add(name string, ok bool, format string, args ...any) bool {
	r.Checks = append(r.Checks, Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
	return ok
}

// Verify checks a receipt file: that it is one JSON receipt, that the key
// it names is the one keys resolves, that the Ed25519 signature matches the
// RFC 8785 form of every other field, that its content claims a complete,
// verified erasure, and that the file is byte for byte as issued.
func Verify(data []byte, keys KeyResolver, o Options) Report {
	var r Report
	obj, checks := ParseObject(data)
	r.Checks = append(r.Checks, checks...)
	if obj == nil {
		return r
	}
	var doc Document
	if err := json.Unmarshal(data, &doc); err != nil {
		r.add("form", false, "not a receipt: %v", err)
		return r
	}
	if problem := formProblem(obj, &doc); problem != "" {
		r.add("form", false, "not a %s version 1 or %d receipt: %s", Type, Version, problem)
		return r
	}
	r.add("form", true, "a %s, version %d, for tenant %s, job %s", Type, doc.Version, doc.TenantID, doc.JobID)
	r.Doc = &doc

	pub, from, err := keys(doc.KeyID)
	if err != nil {
		r.add("key", false, "the key the receipt names (%s): %v", doc.KeyID, err)
		return r
	}
	if got := KeyID(pub); got != doc.KeyID {
		r.add("key", false, "the key from %s is %s, but %s signed this receipt: a wrong key, or the receipt names another signer", from, got, doc.KeyID)
		return r
	}
	r.add("key", true, "Ed25519 public key %s from %s is the one the receipt names", doc.KeyID, from)

	valid, signed, problem := VerifySignature(pub, doc.Signature, obj)
	if problem != "" {
		r.add("signature", false, "%s", problem)
		return r
	}
	detail := fmt.Sprintf("Ed25519 signature over the RFC 8785 canonical form (%d bytes) of every field but \"signature\"", signed)
	if !valid {
		detail += " does NOT match: a field was changed after signing, or the signature is another's"
	}
	if !r.add("signature", valid, "%s", detail) {
		return r
	}
	if problem := contentProblem(&doc); problem != "" {
		r.add("content", false, "%s", problem)
		return r
	}
	r.add("content", true, "status COMPLETED and verified; %d deleter(s), each counted 0 items left after deleting; deleted_total %d is the sum of their deleted_count",
		len(doc.Deleters), doc.DeletedTotal)

	full, err := Canonical(obj)
	exact := err == nil && (bytes.Equal(data, full) || bytes.Equal(data, append(full, '\n')))
	switch {
	case exact:
		r.add("layout", true, "the file is byte for byte the receipt as issued (its RFC 8785 form)")
	case o.AllowReformatted:
		r.add("layout", true, "the file was laid out anew (whitespace or member order), which --allow-reformatted accepts; its content is as signed")
	default:
		r.add("layout", false, "the content is as signed, but the file is not byte for byte the receipt as issued (whitespace or member order changed); --allow-reformatted accepts that")
		return r
	}
	r.Valid = true
	return r
}

// ParseObject makes the first checks of a signed file (a receipt, a ledger
// file): that it is one JSON value, strictly parsed (Parse), and an
// object. obj is nil when a check failed, the last of checks.
func ParseObject(data []byte) (obj map[string]any, checks []Check) {
	v, err := Parse(data)
	if err != nil {
		return nil, []Check{{Name: "json", Detail: fmt.Sprintf("not one complete JSON value (%d bytes): %v", len(data), err)}}
	}
	checks = []Check{{Name: "json", OK: true, Detail: fmt.Sprintf("one JSON value (%d bytes), valid UTF-8, no member twice", len(data))}}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, append(checks, Check{Name: "form", Detail: "the JSON value is not an object"})
	}
	return obj, checks
}

// formProblem checks that the receipt has every field of its version, with
// the right JSON types.
func formProblem(obj map[string]any, doc *Document) string {
	for _, k := range []string{"type", "version", "tenant_id", "job_id", "status", "verified", "requested_at", "started_at",
		"finished_at", "issued_at", "deleted_total", "deleters", "daemon", "key_id", "signature"} {
		if _, ok := obj[k]; !ok {
			return fmt.Sprintf("no %q field", k)
		}
	}
	if doc.Version >= 2 {
		for _, k := range []string{"requested_by_uid", "plan_hash", "approval"} {
			if _, ok := obj[k]; !ok {
				return fmt.Sprintf("no %q field (version %d has it)", k, doc.Version)
			}
		}
	}
	switch {
	case doc.Type != Type:
		return fmt.Sprintf("type is %q", doc.Type)
	case doc.Version < 1 || doc.Version > Version:
		return fmt.Sprintf("version %d is not one this lifecycled knows", doc.Version)
	case doc.TenantID == "" || doc.JobID == "":
		return "tenant_id or job_id is empty"
	case doc.KeyID == "":
		return "key_id is empty"
	}
	return ""
}

// contentProblem checks what a valid signature vouches for: a complete
// erasure with nothing left.
func contentProblem(doc *Document) string {
	if doc.Status != string(deletion.JobCompleted) || !doc.Verified {
		return fmt.Sprintf("the receipt says status %s, verified %v: not a complete, verified erasure", doc.Status, doc.Verified)
	}
	if len(doc.Deleters) == 0 {
		return "the receipt names no deleter"
	}
	var total int64
	for _, d := range doc.Deleters {
		total += d.DeletedCount
		if d.Verification.Count != 0 {
			return fmt.Sprintf("deleter %s: the verification counted %d items left", d.Name, d.Verification.Count)
		}
		for k, n := range d.Verification.Breakdown {
			if n != 0 {
				return fmt.Sprintf("deleter %s: the verification counted %d items left in %s", d.Name, n, k)
			}
		}
		if doc.Version >= 3 {
			if problem := proofProblem(d); problem != "" {
				return fmt.Sprintf("deleter %s: %s", d.Name, problem)
			}
		}
	}
	if doc.Version >= 2 {
		if problem := approvalProblem(doc); problem != "" {
			return problem
		}
	}
	if total != doc.DeletedTotal {
		return fmt.Sprintf("deleted_total %d is not the sum of the deleters' deleted_count (%d)", doc.DeletedTotal, total)
	}
	var prev time.Time
	for _, f := range []struct{ name, at string }{{"requested_at", doc.RequestedAt}, {"started_at", doc.StartedAt},
		{"finished_at", doc.FinishedAt}, {"issued_at", doc.IssuedAt}} {
		t, err := time.Parse(time.RFC3339Nano, f.at)
		if err != nil {
			return fmt.Sprintf("%s %q is not an RFC 3339 time", f.name, f.at)
		}
		if t.Before(prev) {
			return fmt.Sprintf("%s %s is before the time listed ahead of it", f.name, f.at)
		}
		prev = t
	}
	return ""
}

// approvalProblem checks the approval a version 2 receipt records: a job
// that needed an approval ran under one, given after the request and
// before the job finished.
func approvalProblem(doc *Document) string {
	a := doc.Approval
	if a.Required && a.ApprovedAt == nil {
		return "approval.required is true but the receipt records no approval"
	}
	if a.ApprovedAt == nil {
		if a.ApprovedByUID != nil {
			return "approval.approved_by_uid is set without approval.approved_at"
		}
		return ""
	}
	at, err := time.Parse(time.RFC3339Nano, *a.ApprovedAt)
	if err != nil {
		return fmt.Sprintf("approval.approved_at %q is not an RFC 3339 time", *a.ApprovedAt)
	}
	req, err1 := time.Parse(time.RFC3339Nano, doc.RequestedAt)
	fin, err2 := time.Parse(time.RFC3339Nano, doc.FinishedAt)
	if err1 == nil && err2 == nil && (at.Before(req) || at.After(fin)) {
		return fmt.Sprintf("approval.approved_at %s is not between requested_at and finished_at", *a.ApprovedAt)
	}
	if doc.PlanHash == nil {
		return "the receipt records an approval but no plan_hash: an approval is of a plan"
	}
	return ""
}

// proofProblem checks a version 3 deleter entry: a known method, no check
// that found something left, and a deleted count that is the sum of its
// breakdown (one number for what went, whatever triggers or cascades did).
func proofProblem(d Deleter) string {
	switch d.Verification.Method {
	case deletion.MethodIndependent, deletion.MethodCount:
	default:
		return fmt.Sprintf("verification method %q is not one this lifecycled knows", d.Verification.Method)
	}
	if d.Verification.Method == deletion.MethodIndependent && len(d.Verification.Checks) == 0 {
		return "an independent proof with no checks"
	}
	for _, c := range d.Verification.Checks {
		if c.Kind != "kept" && c.Found != 0 {
			return fmt.Sprintf("the proof's %s check of %s found %d items left", c.Kind, c.Target, c.Found)
		}
	}
	if len(d.Deleted) > 0 {
		var sum int64
		for _, n := range d.Deleted {
			sum += n
		}
		if sum != d.DeletedCount {
			return fmt.Sprintf("deleted_count %d is not the sum of its breakdown (%d)", d.DeletedCount, sum)
		}
	}
	return ""
}

// VerifySignature checks sig64, the base64 of an Ed25519 signature by pub,
// over the RFC 8785 canonical form of obj without its "signature" member
// (a receipt, a ledger file): valid, and the length of what was signed
// for the check's detail. problem says why it could not be checked.
func VerifySignature(pub ed25519.PublicKey, sig64 string, obj map[string]any) (valid bool, signed int, problem string) {
	sig, err := base64.StdEncoding.DecodeString(sig64)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return false, 0, fmt.Sprintf("signature is not the base64 of %d bytes", ed25519.SignatureSize)
	}
	rest := make(map[string]any, len(obj))
	for k, val := range obj {
		if k != "signature" {
			rest[k] = val
		}
	}
	form, err := Canonical(rest)
	if err != nil {
		return false, 0, fmt.Sprintf("no canonical form: %v", err)
	}
	return ed25519.Verify(pub, form, sig), len(form), ""
}
