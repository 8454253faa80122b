package adminapi

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 33 case 5: the daemon trusted its socket's directory by path and
// set the socket's mode by path after bind: in a directory another user
// can write, a racing user swapped the path and made a root daemon chmod a
// file of theirs choosing. A directory writable by anyone but the daemon's
// user is refused, as OpenSSH's StrictModes does; parents may be writable
// by everyone only with the sticky bit (/tmp), and by their group.
func TestASocketDirectoryOthersCanWriteIsRefused(t *testing.T) {
	for _, mode := range []os.FileMode{0o777, 0o770, 0o757, 0o1777} {
		dir := filepath.Join(t.TempDir(), "run")
		require.NoError(t, os.Mkdir(dir, 0o700))
		require.NoError(t, os.Chmod(dir, mode))
		l, err := listenUnix(SocketOptions{Path: filepath.Join(dir, "admin.sock"), Mode: 0o660})
		if l != nil {
			l.Close()
		}
		require.Error(t, err, "mode %v", mode)
		require.Contains(t, err.Error(), "writable by", "mode %v: the error says why", mode)
		entries, _ := os.ReadDir(dir)
		require.Empty(t, entries, "mode %v: nothing is created there", mode)
	}
	// A parent writable by everyone, without the sticky bit: refused.
	parent := filepath.Join(t.TempDir(), "shared")
	require.NoError(t, os.MkdirAll(filepath.Join(parent, "run"), 0o700))
	require.NoError(t, os.Chmod(parent, 0o777))
	_, err := listenUnix(SocketOptions{Path: filepath.Join(parent, "run", "admin.sock"), Mode: 0o660})
	require.ErrorContains(t, err, "writable by")
	// Writable by its group (a user private group's home): fine.
	require.NoError(t, os.Chmod(parent, 0o775))
	l, err := listenUnix(SocketOptions{Path: filepath.Join(parent, "run", "admin.sock"), Mode: 0o660})
	require.NoError(t, err)
	l.Close()

	// Its own directory, under /tmp (sticky, writable by all): fine.
	dir := filepath.Join(t.TempDir(), "run")
	require.NoError(t, os.Mkdir(dir, 0o750))
	path := filepath.Join(dir, "admin.sock")
	l, err = listenUnix(SocketOptions{Path: path, Mode: 0o660})
	require.NoError(t, err)
	defer l.Close()
	st, err := os.Lstat(path)
	require.NoError(t, err)
	require.Equal(t, os.ModeSocket|0o660, st.Mode()&(os.ModeSocket|os.ModePerm), "the socket has its mode")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary name left beside it")
}
