package pluginhost

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// A plugin runs with the daemon's credentials and sees every store's
// secrets, so a binary that another local user could have replaced must not
// be run, checksum or not (like sshd's StrictModes): the file, and every
// directory above it, must be owned by root or the daemon's user and not be
// writable by anyone else; a world-writable directory is accepted only with
// the sticky bit (as /tmp), where others cannot replace what they do not
// own. A default path inside plugin_dir that is a symlink must point inside
// plugin_dir too. A binary writable by its group is refused as well: anyone
// in the group could replace it.

// checkTrust returns why path must not be run, or nil. pluginDir is set
// when path is the default one inside plugin_dir.
func checkTrust(path, pluginDir string) error {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return err
	}
	if pluginDir != "" {
		dir, err := filepath.EvalSymlinks(pluginDir)
		if err != nil {
			return err
		}
		if rel, err := filepath.Rel(dir, real); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return fmt.Errorf("%s is a symlink to %s, outside plugin_dir %s: refusing to run it (install the binary in plugin_dir, or name it with path = ...)", path, real, pluginDir)
		}
	}
	fi, err := os.Stat(real)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", real)
	}
	if err := trustedOwner(real, fi); err != nil {
		return err
	}
	switch mode := fi.Mode().Perm(); {
	case mode&0o002 != 0:
		return fmt.Errorf("%s is writable by anyone (mode %04o): refusing to run it (chmod o-w %s)", real, mode, real)
	case mode&0o020 != 0:
		return fmt.Errorf("%s is writable by its group (mode %04o): anyone in that group can replace the plugin; refusing to run it (chmod g-w %s)", real, mode, real)
	}
	for dir := filepath.Dir(real); ; dir = filepath.Dir(dir) {
		di, err := os.Stat(dir)
		if err != nil {
			return err
		}
		if err := trustedOwner(dir, di); err != nil {
			return err
		}
		if mode := di.Mode(); mode.Perm()&0o002 != 0 && mode&os.ModeSticky == 0 {
			return fmt.Errorf("directory %s, above plugin %s, is writable by anyone (mode %04o, no sticky bit): anyone can replace the plugin; refusing to run it (chmod o-w %s)",
				dir, real, mode.Perm(), dir)
		}
		if dir == filepath.Dir(dir) {
			break
		}
	}
	return nil
}

// trustedOwner accepts files owned by root or by the daemon's own user.
func trustedOwner(path string, fi os.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if st.Uid != 0 && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("%s is owned by uid %d, neither root nor the daemon's user (uid %d): refusing to run the plugin under it", path, st.Uid, os.Getuid())
	}
	return nil
}
