// Package idempotency holds the rules of the Idempotency-Key header (IETF
// draft "The Idempotency-Key HTTP Header Field", and the source design's
// choices): which keys are valid, how a request is fingerprinted, and what
// the state store keeps. The admin API's middleware applies them.
package idempotency

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// Header is the request header.
const Header = "Idempotency-Key"

// ReplayedHeader marks a replayed response.
const ReplayedHeader = "Idempotent-Replayed"

// MaxKeyLength is the longest key accepted.
const MaxKeyLength = 255

// ErrInvalidKey is returned by ValidateKey.
var ErrInvalidKey = errors.New("invalid Idempotency-Key")

// ValidateKey accepts 1 to 255 printable ASCII characters.
func ValidateKey(k string) error {
	if k == "" {
		return fmt.Errorf("%w: empty (use 1 to %d printable ASCII characters, e.g. a UUID)", ErrInvalidKey, MaxKeyLength)
	}
	if len(k) > MaxKeyLength {
		return fmt.Errorf("%w: %d characters long (at most %d)", ErrInvalidKey, len(k), MaxKeyLength)
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return fmt.Errorf("%w: byte %d is not printable ASCII (0x%02x)", ErrInvalidKey, i, k[i])
		}
	}
	return nil
}

// Fingerprint identifies a request: its method, path (with query) and body.
// The same key sent with any of them different is a mismatch.
func Fingerprint(method, pathAndQuery string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(method))
	h.Write([]byte{0})
	h.Write([]byte(pathAndQuery))
	h.Write([]byte{0})
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}
