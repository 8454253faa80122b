package adminapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrSocketInUse means another process serves the admin socket.
var ErrSocketInUse = errors.New("admin socket is in use by another process")

// ErrNotASocket means something other than a socket sits at the socket path.
var ErrNotASocket = errors.New("admin socket path exists and is not a socket")

// SocketOptions are the access settings of the admin socket.
type SocketOptions struct {
	Path  string
	Mode  os.FileMode
	Group string // name or numeric gid; "" keeps the daemon's group
}

// listenUnix opens the admin socket with the hygiene operators expect:
// a live socket at the path means another instance runs (refuse); a stale
// one is replaced; anything that is not a socket is never unlinked. The
// socket is created under a temporary name, given its mode and group, and
// renamed into place, so it is never reachable with looser permissions.
func listenUnix(o SocketOptions) (*net.UnixListener, error) {
	dir := filepath.Dir(o.Path)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("create socket directory: %w", err)
		}
	}
	if err := checkSocketDir(dir); err != nil {
		return nil, err
	}
	stale, err := CheckSocketPath(o.Path)
	if err != nil {
		return nil, err
	}
	if stale {
		// A previous daemon died without removing it.
		if err := os.Remove(o.Path); err != nil {
			return nil, fmt.Errorf("remove stale socket %s: %w", o.Path, err)
		}
	}

	// The socket is bound, given its mode and group in a directory of its
	// own (0700): nobody else can reach it there or put anything in its
	// place between those steps, which change it by path.
	// Short names: a socket's path has a limit of 107 bytes, and this one
	// must fit where the socket's own name does.
	priv, err := os.MkdirTemp(dir, ".")
	if err != nil {
		return nil, fmt.Errorf("create a directory for the admin socket: %w", err)
	}
	defer os.RemoveAll(priv)
	tmp := filepath.Join(priv, "s")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", o.Path, err)
	}
	l.SetUnlinkOnClose(false)
	fail := func(err error) (*net.UnixListener, error) {
		l.Close()
		return nil, err
	}
	if err := os.Chmod(tmp, o.Mode); err != nil {
		return fail(fmt.Errorf("chmod admin socket: %w", err))
	}
	if o.Group != "" {
		gid, err := lookupGID(o.Group)
		if err != nil {
			return fail(err)
		}
		if err := os.Lchown(tmp, -1, gid); err != nil {
			return fail(fmt.Errorf("chgrp admin socket to %s: %w", o.Group, err))
		}
	}
	if err := os.Rename(tmp, o.Path); err != nil {
		return fail(fmt.Errorf("move admin socket into place: %w", err))
	}
	return l, nil
}

// checkSocketDir refuses a socket directory that anyone but this user (or
// root) owns or can write, and parents owned by another user or writable by
// everyone without the sticky bit (/tmp has it): whoever can write there
// can put a symlink or another file where the socket goes, as OpenSSH's
// StrictModes refuses. A parent writable by its group passes (a user
// private group's home directory, umask 002); the socket's own directory
// may not be.
func checkSocketDir(dir string) error {
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("socket directory %s: %w", dir, err)
	}
	euid := uint32(os.Geteuid())
	for p, own := resolved, true; ; p, own = filepath.Dir(p), false {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("socket directory %s: %w", p, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("socket directory %s: no owner to check", p)
		}
		writable := fi.Mode().Perm()&0o002 != 0 || own && fi.Mode().Perm()&0o020 != 0
		switch {
		case st.Uid != euid && st.Uid != 0:
			return fmt.Errorf("socket directory %s is owned by uid %d, not by this user (%d) or root: refusing to put the admin socket under it", p, st.Uid, euid)
		case writable && (own || fi.Mode()&os.ModeSticky == 0):
			return fmt.Errorf("socket directory %s is writable by others than its owner (%v): refusing to put the admin socket there; chmod go-w %s or set admin.listen elsewhere", p, fi.Mode().Perm(), p)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// CheckSocketPath says whether the admin socket path is free to use: a live
// socket means another instance runs (ErrSocketInUse), anything that is not
// a socket is never touched (ErrNotASocket), and a socket nobody listens on
// is stale (stale = true, to be replaced). The daemon calls it before it
// starts anything else, so that a second instance never starts its plugins
// (a Kafka source would join the consumer group).
func CheckSocketPath(path string) (stale bool, err error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check admin socket %s: %w", path, err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return false, fmt.Errorf("%w: %s is a %s; remove it or set admin.listen to another path", ErrNotASocket, path, describeMode(fi.Mode()))
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return false, fmt.Errorf("%w: %s answers connections; is lifecycled already running? (systemctl status lifecycled)", ErrSocketInUse, path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return false, fmt.Errorf("check existing socket %s: %w", path, err)
	}
	return true, nil
}

// removeSocket removes the socket at path if it is still the one we created
// (same inode), so that a newer daemon's socket is never removed by an old one.
func removeSocket(path string, ino uint64) {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 {
		return
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Ino == ino {
		_ = os.Remove(path)
	}
}

func inodeOf(path string) uint64 {
	fi, err := os.Lstat(path)
	if err != nil {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

func lookupGID(group string) (int, error) {
	if n, err := strconv.Atoi(group); err == nil {
		return n, nil
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		return 0, fmt.Errorf("admin.socket_group %q: %w", group, err)
	}
	return strconv.Atoi(g.Gid)
}

func describeMode(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m.IsRegular():
		return "regular file"
	case m&os.ModeSymlink != 0:
		return "symbolic link"
	default:
		return "non-socket file (" + m.String() + ")"
	}
}

// PeerCred is who is on the other end of a Unix socket connection.
type PeerCred struct {
	UID, GID uint32
	PID      int32
	Known    bool // false on TCP (the metrics listener)
}

type peerKey struct{}

// connContext records the peer credentials of each accepted connection.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if lc, ok := c.(*limitedConn); ok {
		c = lc.Conn
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return context.WithValue(ctx, peerKey{}, PeerCred{})
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return context.WithValue(ctx, peerKey{}, PeerCred{})
	}
	var cred *unix.Ucred
	var credErr error
	_ = raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if credErr != nil || cred == nil {
		return context.WithValue(ctx, peerKey{}, PeerCred{})
	}
	return context.WithValue(ctx, peerKey{}, PeerCred{UID: cred.Uid, GID: cred.Gid, PID: cred.Pid, Known: true})
}

// Peer returns the credentials of the request's caller.
func Peer(ctx context.Context) PeerCred {
	p, _ := ctx.Value(peerKey{}).(PeerCred)
	return p
}
