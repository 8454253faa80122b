package receipt

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGeneratedKeyIsPrivateAndKept(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, KeyFileName)
	priv, created, err := LoadOrGenerate(path)
	require.NoError(t, err)
	require.True(t, created)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	again, created, err := LoadOrGenerate(path)
	require.NoError(t, err)
	require.False(t, created, "the key of the first start is kept")
	require.True(t, priv.Equal(again))

	_, err = GenerateKey(path)
	require.ErrorIs(t, err, os.ErrExist, "never replaced")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file is left behind")
}

func TestLoadKeyRefusesWhatOthersCanRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k.pem")
	_, err := GenerateKey(path)
	require.NoError(t, err)
	require.NoError(t, os.Chmod(path, 0o644))
	_, err = LoadKey(path)
	require.ErrorContains(t, err, "mode 0644")
	require.NoError(t, os.Chmod(path, 0o640))
	_, err = LoadKey(path)
	require.NoError(t, err, "the daemon's group may read it")

	pubOnly := filepath.Join(t.TempDir(), "pub.pem")
	priv, err := LoadKey(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(pubOnly, PublicPEM(priv.Public().(ed25519.PublicKey)), 0o600))
	_, err = LoadKey(pubOnly)
	require.ErrorContains(t, err, `not a PEM "PRIVATE KEY"`)
}

func TestParsePublicKeyForms(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	body, err := json.Marshal(NewKeyBody(pub))
	require.NoError(t, err)
	for name, in := range map[string][]byte{
		"pem":       PublicPEM(pub),
		"api json":  body,
		"base64":    []byte(base64.StdEncoding.EncodeToString(pub) + "\n"),
		"pem in ws": append([]byte("\n\n"), PublicPEM(pub)...),
	} {
		got, err := ParsePublicKey(in)
		require.NoError(t, err, name)
		require.True(t, pub.Equal(got), name)
	}
	_, err = ParsePublicKey([]byte("not a key"))
	require.Error(t, err)
	_, err = ParsePublicKey([]byte(base64.StdEncoding.EncodeToString(priv)))
	require.Error(t, err, "64 bytes are not a public key")
}

func TestConfigFingerprintLeavesSecretsOut(t *testing.T) {
	cfg := func(password, table string) map[string]any {
		return map[string]any{
			"dsn":           "postgres://app:" + password + "@db/app",
			"password":      password,
			"password_file": "/etc/lifecycled/pw",
			"tables":        []any{table, "workflow_steps"},
			"batch_size":    int64(1000),
		}
	}
	a, err := ConfigFingerprint("postgres:workflows", "postgres", cfg("hunter2", "workflow_instances"))
	require.NoError(t, err)
	b, err := ConfigFingerprint("postgres:workflows", "postgres", cfg("other-secret", "workflow_instances"))
	require.NoError(t, err)
	require.Equal(t, a, b, "a secret's value does not change the fingerprint")
	c, err := ConfigFingerprint("postgres:workflows", "postgres", cfg("hunter2", "workflow_definitions"))
	require.NoError(t, err)
	require.NotEqual(t, a, c, "any other setting does")
	d, err := ConfigFingerprint("postgres:other", "postgres", cfg("hunter2", "workflow_instances"))
	require.NoError(t, err)
	require.NotEqual(t, a, d, "so does the deleter's name")
	require.Regexp(t, `^sha256:[0-9a-f]{64}$`, a)
}
