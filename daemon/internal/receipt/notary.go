package receipt

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/buildinfo"
	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
)

// Notary signs receipts with one key; it implements deletion.Notary.
type Notary struct {
	key     ed25519.PrivateKey
	keyID   string
	daemon  string
	plugins func() map[string]Plugin
	now     func() time.Time
}

var _ deletion.Notary = (*Notary)(nil)

// NewNotary signs with key; daemonID names this daemon in receipts, and
// plugins tells, per deleter name, which plugin runs it and under which
// configuration.
func NewNotary(key ed25519.PrivateKey, daemonID string, plugins func() map[string]Plugin) *Notary {
	pub := key.Public().(ed25519.PublicKey)
	return &Notary{key: key, keyID: KeyID(pub), daemon: daemonID, plugins: plugins, now: time.Now}
}

// KeyID implements deletion.Notary.
func (n *Notary) KeyID() string { return n.keyID }

// PublicKey is the key that verifies this notary's receipts.
func (n *Notary) PublicKey() ed25519.PublicKey { return n.key.Public().(ed25519.PublicKey) }

// Issue implements deletion.Notary: the receipt of job, which finished at
// finishedAt, as the bytes to store and hand out (its RFC 8785 form, the
// signature included).
func (n *Notary) Issue(job *deletion.Job, finishedAt time.Time) (*deletion.SignedReceipt, error) {
	bi := buildinfo.Get()
	doc := build(job, finishedAt, n.now(), n.plugins(), Daemon{Version: bi.Version, Commit: bi.Commit, ID: n.daemon}, n.keyID)
	body, err := Sign(doc, n.key)
	if err != nil {
		return nil, err
	}
	return &deletion.SignedReceipt{KeyID: n.keyID, Body: body}, nil
}

// Sign signs doc (its Signature is ignored) and returns the signed
// document in its RFC 8785 form.
func Sign(doc Document, key ed25519.PrivateKey) ([]byte, error) {
	doc.Signature = ""
	signed, err := Canonical(doc)
	if err != nil {
		return nil, fmt.Errorf("canonical form of the receipt: %w", err)
	}
	v, err := Parse(signed)
	if err != nil {
		return nil, err
	}
	v.(map[string]any)["signature"] = base64.StdEncoding.EncodeToString(ed25519.Sign(key, signed))
	return Canonical(v)
}
