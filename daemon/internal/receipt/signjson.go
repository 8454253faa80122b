package receipt

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
)

// SignJSON signs any document the way receipts are signed: Ed25519 over
// the RFC 8785 form of v without a "signature" member, returned in its
// RFC 8785 form with the signature added. The erasure ledger file uses it;
// its "type" member keeps it from passing for a receipt.
func (n *Notary) SignJSON(v any) ([]byte, error) { return signJSON(v, n.key) }

func signJSON(v any, key ed25519.PrivateKey) ([]byte, error) {
	unsigned, err := Canonical(v)
	if err != nil {
		return nil, fmt.Errorf("canonical form: %w", err)
	}
	parsed, err := Parse(unsigned)
	if err != nil {
		return nil, err
	}
	obj, ok := parsed.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("only a JSON object can be signed, not %T", parsed)
	}
	delete(obj, "signature")
	signed, err := Canonical(obj)
	if err != nil {
		return nil, err
	}
	obj["signature"] = base64.StdEncoding.EncodeToString(ed25519.Sign(key, signed))
	return Canonical(obj)
}
