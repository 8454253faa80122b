package receipt

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/lifecycled/lifecycled/daemon/internal/config"
)

// Algorithm is the one signature algorithm of receipts.
const Algorithm = "Ed25519"

// KeyFileName is the generated key's name in the state directory.
const KeyFileName = config.ReceiptKeyFileName

// KeyID names a public key: "sha256:" and the hex SHA-256 of its 32 raw bytes.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// PublicPEM is pub as a PEM "PUBLIC KEY" block (PKIX, what openssl prints).
func PublicPEM(pub ed25519.PublicKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		// An ed25519.PublicKey always marshals.
		panic(fmt.Sprintf("marshal public key: %v", err))
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// LoadKey reads a PEM "PRIVATE KEY" (PKCS #8) Ed25519 key. It refuses a
// file that others than its owner's group may read or that anyone but the
// owner may write: whoever reads the key can forge receipts.
func LoadKey(path string) (ed25519.PrivateKey, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("receipt key: %w", err)
	}
	if m := fi.Mode().Perm(); m&0o027 != 0 {
		return nil, fmt.Errorf("receipt key %s has mode %04o: anyone who can read it can forge receipts; chmod 0600 it (0640 at most)", path, m)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("receipt key: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("receipt key %s: not a PEM \"PRIVATE KEY\" block (make one with `lifecycled receipt keygen FILE`)", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("receipt key %s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("receipt key %s is a %T, not an Ed25519 key", path, k)
	}
	return priv, nil
}

// GenerateKey writes a new Ed25519 key to path with mode 0600, refusing to
// replace a file that exists.
func GenerateKey(path string) (ed25519.PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, err
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	// Written aside and linked into place: the key appears whole or not at
	// all, and never replaces one (link fails if the name exists).
	tmp, err := os.CreateTemp(filepath.Dir(path), ".receipt-key-*")
	if err != nil {
		return nil, fmt.Errorf("create receipt key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return nil, err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		return nil, fmt.Errorf("create receipt key: %w", err)
	}
	return priv, nil
}

// LoadOrGenerate loads the key at path, creating it first when it does
// not exist; created says whether it did.
func LoadOrGenerate(path string) (priv ed25519.PrivateKey, created bool, err error) {
	priv, err = LoadKey(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return priv, false, err
	}
	priv, err = GenerateKey(path)
	if errors.Is(err, fs.ErrExist) {
		// Another process made it in between.
		priv, err = LoadKey(path)
		return priv, false, err
	}
	return priv, err == nil, err
}

// KeyBody is GET /api/v1/receipts/key: a public key in the forms
// ParsePublicKey reads.
type KeyBody struct {
	KeyID        string `json:"key_id"`
	Algorithm    string `json:"algorithm"`
	PublicKey    string `json:"public_key"` // base64 of the 32 raw bytes
	PublicKeyPEM string `json:"public_key_pem"`
	RegisteredAt string `json:"registered_at,omitempty"`
}

// NewKeyBody describes pub.
func NewKeyBody(pub ed25519.PublicKey) KeyBody {
	return KeyBody{KeyID: KeyID(pub), Algorithm: Algorithm, PublicKey: base64.StdEncoding.EncodeToString(pub),
		PublicKeyPEM: string(PublicPEM(pub))}
}

// ParsePublicKey reads an Ed25519 public key given as a PEM "PUBLIC KEY"
// block, as the JSON answer of GET /api/v1/receipts/key, or as the base64
// of its 32 bytes.
func ParsePublicKey(data []byte) (ed25519.PublicKey, error) {
	trimmed := strings.TrimSpace(string(data))
	if block, _ := pem.Decode([]byte(trimmed)); block != nil {
		if block.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("a PEM %q block, not a \"PUBLIC KEY\" (never hand out the private key)", block.Type)
		}
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, err
		}
		pub, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("a %T public key, not Ed25519", k)
		}
		return pub, nil
	}
	if strings.HasPrefix(trimmed, "{") {
		var body KeyBody
		if err := json.Unmarshal([]byte(trimmed), &body); err != nil {
			return nil, fmt.Errorf("JSON that is not a receipt key: %w", err)
		}
		if body.Algorithm != Algorithm {
			return nil, fmt.Errorf("key algorithm %q, not %s", body.Algorithm, Algorithm)
		}
		trimmed = body.PublicKey
	}
	raw, err := base64.StdEncoding.DecodeString(trimmed)
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return nil, errors.New("not a PEM PUBLIC KEY, the JSON of GET /api/v1/receipts/key, or the base64 of 32 bytes")
	}
	return ed25519.PublicKey(raw), nil
}
