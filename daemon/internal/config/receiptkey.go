package config

import (
	"os"
	"path/filepath"
	"strings"
)

// ReceiptKeyFileName is the name of the receipt key generated in the state
// directory.
const ReceiptKeyFileName = "receipt-ed25519.pem"

// DefaultStateDirectory is where the key of a daemon with a PostgreSQL
// state store is generated outside systemd (the packaged unit's
// StateDirectory=lifecycled).
const DefaultStateDirectory = "/var/lib/lifecycled"

// ReceiptKeyPath is the key that signs erasure receipts, and whether it is
// generated there at first start: deletion.receipt_key_file as configured
// (never generated: a named key must exist, so that daemons meant to share
// one cannot each make their own), else receipt-ed25519.pem in the state
// directory, which is the SQLite file's directory, or for PostgreSQL
// systemd's $STATE_DIRECTORY (StateDirectory=) or /var/lib/lifecycled.
func (c *Config) ReceiptKeyPath() (path string, generate bool) {
	if c.Deletion.ReceiptKeyFile != "" {
		return c.resolvePath(c.Deletion.ReceiptKeyFile), false
	}
	if kind, dsn, err := c.StateDSN(); err == nil && kind == StateSQLite && dsn != ":memory:" {
		return filepath.Join(filepath.Dir(dsn), ReceiptKeyFileName), true
	}
	dir := DefaultStateDirectory
	if env := os.Getenv("STATE_DIRECTORY"); env != "" {
		dir, _, _ = strings.Cut(env, ":")
	}
	return filepath.Join(dir, ReceiptKeyFileName), true
}
