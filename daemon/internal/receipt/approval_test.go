package receipt

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// approvedJob is completedJob as it ends under require_approval: uid 1001
// asked, uid 1002 approved the plan.
func approvedJob() (job *Document, priv ed25519.PrivateKey) {
	_, priv, _ = ed25519.GenerateKey(rand.Reader)
	j := completedJob()
	requester, approver := int64(1001), int64(1002)
	approvedAt := t0.Add(30 * time.Second)
	j.RequestedByUID, j.ApprovedByUID, j.ApprovedAt = &requester, &approver, &approvedAt
	j.ApprovalRequired, j.PlanHash = true, "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	doc := build(j, t0.Add(2*time.Minute), t0.Add(3*time.Minute), plugins(), Daemon{Version: "dev"}, KeyID(priv.Public().(ed25519.PublicKey)))
	return &doc, priv
}

func TestReceiptRecordsRequesterApproverAndPlan(t *testing.T) {
	doc, priv := approvedJob()
	body, err := Sign(*doc, priv)
	require.NoError(t, err)
	rep := Verify(body, keyOf(priv.Public().(ed25519.PublicKey)), Options{})
	require.True(t, rep.Valid, "%+v", rep.Checks)
	require.Equal(t, Version, rep.Doc.Version)
	var raw map[string]any
	require.NoError(t, json.Unmarshal(body, &raw))
	require.Equal(t, 1001.0, raw["requested_by_uid"])
	require.Equal(t, doc.PlanHash, rep.Doc.PlanHash)
	require.Equal(t, map[string]any{"required": true, "approved_at": "2026-11-01T12:00:30.000+00:00", "approved_by_uid": 1002.0}, raw["approval"])

	// The approval is signed like everything else: another approver uid
	// breaks the signature.
	var tampered map[string]any
	require.NoError(t, json.Unmarshal(body, &tampered))
	tampered["approval"].(map[string]any)["approved_by_uid"] = 1001.0
	out, err := Canonical(tampered)
	require.NoError(t, err)
	c := failedCheck(t, Verify(out, keyOf(priv.Public().(ed25519.PublicKey)), Options{}))
	require.Equal(t, "signature", c.Name)
}

// A receipt issued before version 2 (no requester, plan or approval
// fields) still verifies.
func TestVersion1ReceiptsStillVerify(t *testing.T) {
	doc, priv := approvedJob()
	v, err := Parse(mustCanonical(t, *doc))
	require.NoError(t, err)
	obj := v.(map[string]any)
	for _, k := range []string{"requested_by_uid", "plan_hash", "approval", "signature"} {
		delete(obj, k)
	}
	obj["version"] = 1.0
	signed, err := Canonical(obj)
	require.NoError(t, err)
	obj["signature"] = base64.StdEncoding.EncodeToString(ed25519.Sign(priv, signed))
	body, err := Canonical(obj)
	require.NoError(t, err)
	rep := Verify(body, keyOf(priv.Public().(ed25519.PublicKey)), Options{})
	require.True(t, rep.Valid, "%+v", rep.Checks)
	require.Equal(t, 1, rep.Doc.Version)

	// The same document claiming version 2 lacks what version 2 has.
	obj["version"] = 2.0
	delete(obj, "signature")
	signed, err = Canonical(obj)
	require.NoError(t, err)
	obj["signature"] = base64.StdEncoding.EncodeToString(ed25519.Sign(priv, signed))
	body, err = Canonical(obj)
	require.NoError(t, err)
	c := failedCheck(t, Verify(body, keyOf(priv.Public().(ed25519.PublicKey)), Options{}))
	require.Equal(t, "form", c.Name)
	require.Contains(t, c.Detail, `no "requested_by_uid" field`)
}

func mustCanonical(t *testing.T, doc Document) []byte {
	t.Helper()
	doc.Signature = ""
	b, err := Canonical(doc)
	require.NoError(t, err)
	return b
}

func TestApprovalContentChecks(t *testing.T) {
	tests := map[string]struct {
		edit func(*Document)
		want string
	}{
		"required, none":      {func(d *Document) { d.Approval.ApprovedAt, d.Approval.ApprovedByUID = nil, nil }, "records no approval"},
		"approver, no time":   {func(d *Document) { d.Approval.Required, d.Approval.ApprovedAt = false, nil }, "without approval.approved_at"},
		"approved after end":  {func(d *Document) { s := "2026-11-01T13:00:00.000+00:00"; d.Approval.ApprovedAt = &s }, "not between"},
		"approved before ask": {func(d *Document) { s := "2026-11-01T11:00:00.000+00:00"; d.Approval.ApprovedAt = &s }, "not between"},
		"approval, no plan":   {func(d *Document) { d.PlanHash = nil }, "no plan_hash"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			doc, priv := approvedJob()
			tc.edit(doc)
			body, err := Sign(*doc, priv)
			require.NoError(t, err)
			c := failedCheck(t, Verify(body, keyOf(priv.Public().(ed25519.PublicKey)), Options{}))
			require.Equal(t, "content", c.Name, "%+v", c)
			require.Contains(t, c.Detail, tc.want)
		})
	}
}
