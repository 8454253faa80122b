package console

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The embedded htmx is the one htmx.lock records (make htmx writes both).
func TestVendoredHTMXMatchesItsLock(t *testing.T) {
	js, err := staticFS.ReadFile("static/htmx.min.js")
	require.NoError(t, err)
	lock, err := staticFS.ReadFile("static/htmx.lock")
	require.NoError(t, err)
	f := strings.Fields(string(lock))
	require.Len(t, f, 3, "htmx.lock: %q", lock)
	sum := sha256.Sum256(js)
	require.Equal(t, f[2], "sha256:"+hex.EncodeToString(sum[:]), "static/htmx.min.js is not the htmx.lock records; run make htmx")
}
