// Package receipt issues and verifies signed erasure receipts: when a
// tenant deletion job is COMPLETED and verified, the daemon signs a JSON
// document that says what was deleted, where, by which plugins under which
// configuration, and that a count afterwards found nothing left. Anyone
// with the daemon's public key can check it offline (`lifecycled receipt
// verify`): the signature is Ed25519 over the RFC 8785 canonical form of
// every field but "signature", so that changing any of them breaks it.
package receipt

import (
	"sort"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
)

// Type and Version name the document format. Version 2 added
// requested_by_uid, plan_hash and approval; version 3 says how each
// deleter's verification was done (method) and, for an independent proof,
// its checks. Receipts of versions 1 and 2 still verify.
const (
	Type    = "lifecycled.erasure-receipt"
	Version = 3
)

// Document is a receipt as issued. Every field but Signature is signed.
type Document struct {
	Type    string `json:"type"`
	Version int    `json:"version"`
	// TenantID is the canonical id every deleter and the verification used.
	TenantID string `json:"tenant_id"`
	JobID    string `json:"job_id"`
	Status   string `json:"status"`   // COMPLETED
	Verified bool   `json:"verified"` // true
	// RequestedAt is when the deletion was asked for; NotBefore when it
	// could start (a grace period), null when at once; StartedAt when a
	// daemon first began it; FinishedAt when the verification ended.
	RequestedAt string  `json:"requested_at"`
	NotBefore   *string `json:"not_before"`
	StartedAt   string  `json:"started_at"`
	FinishedAt  string  `json:"finished_at"`
	IssuedAt    string  `json:"issued_at"`
	Attempts    int     `json:"attempts"`
	// DeletedTotal sums the deleters' DeletedCount.
	DeletedTotal int64     `json:"deleted_total"`
	Deleters     []Deleter `json:"deleters"`
	// RequestedByUID is the uid that asked for the deletion (peer
	// credentials of the admin socket); null when unknown.
	RequestedByUID *int64 `json:"requested_by_uid"`
	// PlanHash is the plan the job was held to and checked against at
	// every start; null when no deleter's plan was complete.
	PlanHash *string `json:"plan_hash"`
	// Approval says whether the job needed an approval, and who gave the
	// last one.
	Approval Approval `json:"approval"`
	Daemon   Daemon   `json:"daemon"`
	// Reerases names the erasure this one repeats when re-verification
	// found the tenant's data again after it (a restored backup); absent
	// from a first erasure's receipt.
	Reerases *Reerasure `json:"reerases,omitempty"`
	// KeyID names the public key that verifies Signature (KeyID()).
	KeyID string `json:"key_id"`
	// Signature is the base64 (standard, padded) Ed25519 signature of the
	// RFC 8785 form of the document without this member.
	Signature string `json:"signature,omitempty"`
}

// Deleter is what one deleter did for the tenant.
type Deleter struct {
	Name string `json:"name"`
	// Plugin, PluginVersion and PluginSHA256 name the plugin binary that
	// ran the final attempt and the verification.
	Plugin        string `json:"plugin"`
	PluginVersion string `json:"plugin_version"`
	PluginSHA256  string `json:"plugin_sha256"`
	// ConfigSHA256 is the fingerprint of the deleter's [deleter.config]
	// with its secrets left out (ConfigFingerprint).
	ConfigSHA256 string `json:"config_sha256"`
	DeletedCount int64  `json:"deleted_count"`
	// Deleted is DeletedCount per table, key pattern, ... as the plugin
	// names them.
	Deleted      map[string]int64 `json:"deleted"`
	Verification Verification     `json:"verification"`
}

// Verification is what the check after the deletes found: zero everywhere;
// Method and Checks since version 3, each check with what it found, 0
// everywhere but in "kept" (what the config keeps on purpose). It is the
// job's record as stored, signed as it is: a field added there changes
// what receipts sign, which TestVerificationFieldsAreTheSignedOnes pins.
type Verification = deletion.Verification

// ProofCheck is one check of an independent proof.
type ProofCheck = deletion.ProofCheck

// Approval is the approval part of a receipt (version 2).
type Approval struct {
	// Required: the job was created under deletion.require_approval.
	Required bool `json:"required"`
	// ApprovedAt and ApprovedByUID record the approval the job ran under
	// (after a plan change, the approval of the new plan); null when it
	// ran without one.
	ApprovedAt    *string `json:"approved_at"`
	ApprovedByUID *int64  `json:"approved_by_uid"`
}

// Reerasure names an earlier erasure of the same tenant: its job and the
// ledger's hash of its receipt ("sha256:<hex>" of the receipt file's bytes,
// without the final newline; "" when that job issued none).
type Reerasure struct {
	JobID         string `json:"job_id"`
	ReceiptSHA256 string `json:"receipt_sha256"`
}

// Daemon names the lifecycled that issued the receipt.
type Daemon struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	// ID is the daemon's lease owner name (host/pid/random).
	ID string `json:"id"`
}

// Plugin is what the daemon knows of a deleter's plugin when it issues.
type Plugin struct {
	Plugin, Version, SHA256, ConfigSHA256 string
}

// build fills a document (unsigned) from a finished job.
func build(job *deletion.Job, finishedAt, issuedAt time.Time, plugins map[string]Plugin, daemon Daemon, keyID string) Document {
	doc := Document{
		Type: Type, Version: Version, TenantID: job.TenantID, JobID: job.ID.String(),
		Status: string(deletion.JobCompleted), Verified: true,
		RequestedAt: deletion.FormatTime(job.CreatedAt), FinishedAt: deletion.FormatTime(finishedAt),
		IssuedAt: deletion.FormatTime(issuedAt), Attempts: job.Attempts, Daemon: daemon, KeyID: keyID,
		Deleters: []Deleter{},
	}
	if job.NotBefore != nil {
		s := deletion.FormatTime(*job.NotBefore)
		doc.NotBefore = &s
	}
	doc.RequestedByUID = job.RequestedByUID
	if job.PlanHash != "" {
		h := job.PlanHash
		doc.PlanHash = &h
	}
	doc.Approval = Approval{Required: job.ApprovalRequired, ApprovedByUID: job.ApprovedByUID}
	if job.ApprovedAt != nil {
		s := deletion.FormatTime(*job.ApprovedAt)
		doc.Approval.ApprovedAt = &s
	}
	if job.Reerases != nil {
		doc.Reerases = &Reerasure{JobID: job.Reerases.JobID.String(), ReceiptSHA256: job.Reerases.ReceiptSHA256}
	}
	started := job.CreatedAt
	if job.StartedAt != nil {
		started = *job.StartedAt
	}
	doc.StartedAt = deletion.FormatTime(started)
	ds := append([]deletion.DeleterState(nil), job.Deleters...)
	sort.Slice(ds, func(i, j int) bool { return ds[i].Name < ds[j].Name })
	for _, d := range ds {
		p := plugins[d.Name]
		entry := Deleter{Name: d.Name, Plugin: p.Plugin, PluginVersion: p.Version, PluginSHA256: p.SHA256,
			ConfigSHA256: p.ConfigSHA256, DeletedCount: d.DeletedCount, Deleted: counts(d.DeletedBreakdown),
			Verification: Verification{Breakdown: map[string]int64{}}}
		if d.Verification != nil {
			entry.Verification = Verification{Count: d.Verification.Count, Breakdown: counts(d.Verification.Breakdown), Method: d.Verification.Method}
			if entry.Verification.Method == "" {
				entry.Verification.Method = deletion.MethodCount
			}
			entry.Verification.Checks = append(entry.Verification.Checks, d.Verification.Checks...)
		}
		doc.DeletedTotal += d.DeletedCount
		doc.Deleters = append(doc.Deleters, entry)
	}
	return doc
}

func counts(m map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
