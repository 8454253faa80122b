package idempotency

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValidateKey(t *testing.T) {
	tests := map[string]struct {
		key string
		ok  bool
	}{
		"uuid":       {"550e8400-e29b-41d4-a716-446655440000", true},
		"one char":   {"a", true},
		"255 chars":  {strings.Repeat("k", 255), true},
		"with space": {"my key 1", true},
		"symbols":    {"~!@#$%^&*()_+{}|:<>?", true},
		"empty":      {"", false},
		"256 chars":  {strings.Repeat("k", 256), false},
		"newline":    {"a\nb", false},
		"tab":        {"a\tb", false},
		"nul":        {"a\x00", false},
		"del":        {"a\x7f", false},
		"non-ascii":  {"clé", false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := ValidateKey(tc.key)
			if tc.ok {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, ErrInvalidKey)
			}
		})
	}
}

func TestFingerprint(t *testing.T) {
	base := Fingerprint("POST", "/api/v1/dlq/messages/x/retry", []byte(`{}`))
	require.Len(t, base, 64)
	require.Equal(t, base, Fingerprint("POST", "/api/v1/dlq/messages/x/retry", []byte(`{}`)))
	require.NotEqual(t, base, Fingerprint("POST", "/api/v1/dlq/messages/y/retry", []byte(`{}`)), "path")
	require.NotEqual(t, base, Fingerprint("PUT", "/api/v1/dlq/messages/x/retry", []byte(`{}`)), "method")
	require.NotEqual(t, base, Fingerprint("POST", "/api/v1/dlq/messages/x/retry", []byte(`{"a":1}`)), "body")
	// The separators keep fields from sliding into each other.
	require.NotEqual(t, Fingerprint("POST", "/ab", nil), Fingerprint("POST", "/a", []byte("b")))
}
