package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/google/uuid"
	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/lifecycled/lifecycled/daemon/internal/config"
)

// DefaultAddr is the packaged admin socket.
const DefaultAddr = "unix:///run/lifecycled/admin.sock"

// resolveAddr picks the admin address: --addr, then LIFECYCLED_ADDR, then
// the socket named in ./config.toml when run from a checkout, then the
// packaged default.
func resolveAddr(flag string) string {
	if flag != "" {
		return flag
	}
	if v := os.Getenv("LIFECYCLED_ADDR"); v != "" {
		return v
	}
	if _, err := os.Stat("config.toml"); err == nil {
		if cfg, err := config.Load("config.toml"); err == nil {
			if p, err := cfg.SocketPath(); err == nil {
				return "unix://" + p
			}
		}
	}
	return DefaultAddr
}

// client is the admin API's typed client on the Unix socket, with the
// socket's errors turned into advice.
type client struct {
	*adminclient.Client
	addr string
	path string
}

func newClient(addr string) (*client, error) {
	var path string
	switch {
	case strings.HasPrefix(addr, "unix://"):
		path = strings.TrimPrefix(addr, "unix://")
	case addr != "" && !strings.Contains(addr, "://"):
		path = addr // a bare socket path
		addr = "unix://" + path
	default:
		return nil, usageErrorf("--addr must be a socket path or unix:///path/to/admin.sock; got %q", addr)
	}
	c := &client{addr: addr, path: path}
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}}
	c.Client = adminclient.New(doerFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := hc.Do(req)
		if err != nil {
			return nil, c.explainDialError(err)
		}
		return resp, nil
	}))
	return c, nil
}

// doerFunc is a function as an adminclient.Doer.
type doerFunc func(*http.Request) (*http.Response, error)

func (f doerFunc) Do(req *http.Request) (*http.Response, error) { return f(req) }

// serverError is an error answer from the daemon (exit code 2).
type serverError = adminclient.Error

// once is the Idempotency-Key of one CLI command's change: a retried
// request (a lost answer) does not change things twice.
func once() adminclient.Option { return adminclient.IdempotencyKey("cli-" + uuid.NewString()) }

// explainDialError turns socket errors into advice.
func (c *client) explainDialError(err error) error {
	switch {
	case errors.Is(err, syscall.ENOENT):
		return localErrorf("cannot reach lifecycled: %s does not exist. Is the daemon running? (systemctl status lifecycled, or `make run` in a checkout; --addr or LIFECYCLED_ADDR choose another socket)", c.path)
	case errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM):
		return localErrorf("%s", accessHint(c.path))
	case errors.Is(err, syscall.ECONNREFUSED):
		return localErrorf("cannot reach lifecycled: %s refuses connections (stale socket: the daemon is not running)", c.path)
	default:
		return localErrorf("cannot reach lifecycled at %s: %v", c.addr, err)
	}
}

// accessHint explains a permission error on the socket: a directory on the
// way that the caller cannot enter, or the socket's group to join (never
// root: a socket in group root means admin.socket_group is unset).
func accessHint(path string) string {
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		if unix.Access(dir, unix.X_OK) != nil {
			return fmt.Sprintf("permission denied on %s: you cannot enter the directory %s (%s); "+
				"its mode must let the admin group through (the packaged unit sets RuntimeDirectoryMode=0755)", path, dir, describeOwner(dir))
		}
		if dir == filepath.Dir(dir) {
			break
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Sprintf("permission denied on %s: %v", path, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Sprintf("permission denied on %s", path)
	}
	if st.Gid == 0 {
		return fmt.Sprintf("permission denied on %s: the socket belongs to group root, so only root can use it; "+
			"set admin.socket_group (e.g. \"lifecycled-admin\") in the daemon's config and add operators to that group", path)
	}
	group := fmt.Sprint(st.Gid)
	if g, err := user.LookupGroupId(group); err == nil {
		group = g.Name
	}
	return fmt.Sprintf("permission denied on %s: join the socket's group (%s), e.g. `sudo usermod -aG %s $USER`, then log in again", path, group, group)
}

func describeOwner(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return err.Error()
	}
	desc := fmt.Sprintf("mode %04o", fi.Mode().Perm())
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		owner, group := fmt.Sprint(st.Uid), fmt.Sprint(st.Gid)
		if u, err := user.LookupId(owner); err == nil {
			owner = u.Username
		}
		if g, err := user.LookupGroupId(group); err == nil {
			group = g.Name
		}
		desc += fmt.Sprintf(", %s:%s", owner, group)
	}
	return desc
}

func withTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
