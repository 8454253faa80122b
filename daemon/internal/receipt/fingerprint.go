package receipt

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/lifecycled/lifecycled/daemon/internal/config"
)

// ConfigFingerprint is a deleter's config_sha256 in receipts: "sha256:" and
// the hex SHA-256 of the RFC 8785 form of
//
//	{"config": <the [deleter.config] table>, "name": <name>, "plugin": <plugin>}
//
// where the table is as `lifecycled config dump` shows it: every value of a
// secret key (password, token, secret_access_key, ...) replaced by
// "[REDACTED]" and passwords inside connection strings too, while *_file
// keys keep their paths. A change of any setting but a secret's value
// changes the fingerprint, and the fingerprint tells nothing of a secret.
func ConfigFingerprint(name, plugin string, cfg map[string]any) (string, error) {
	redacted := config.RedactMap(cfg)
	if redacted == nil {
		redacted = map[string]any{}
	}
	b, err := Canonical(map[string]any{"config": redacted, "name": name, "plugin": plugin})
	if err != nil {
		return "", fmt.Errorf("fingerprint of %s's config: %w", name, err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}
