package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

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

// client talks to the admin API over its Unix socket.
type client struct {
	addr string
	path string
	http *http.Client
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
	return &client{
		addr: addr,
		path: path,
		http: &http.Client{
			Transport: &http.Transport{
				DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					var d net.Dialer
					return d.DialContext(ctx, "unix", path)
				},
			},
		},
	}, nil
}

// serverError is an error answer from the daemon (exit code 2).
type serverError struct {
	Status  int
	Code    string
	Message string
	Body    []byte
}

func (e *serverError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("daemon answered %d: %s", e.Status, strings.TrimSpace(string(e.Body)))
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// do sends a request and returns the raw body of a 2xx answer.
func (c *client) do(ctx context.Context, method, path string, body any, headers map[string]string) ([]byte, int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, 0, err
		}
		// A nil map marshals as null, which the API refuses as a body:
		// nothing to send is no body.
		if string(b) != "null" {
			rd = bytes.NewReader(b)
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://localhost"+path, rd)
	if err != nil {
		return nil, 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, 0, c.explainDialError(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode >= 300 {
		se := &serverError{Status: resp.StatusCode, Body: data}
		var env struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(data, &env) == nil {
			se.Code, se.Message = env.Error.Code, env.Error.Message
		}
		return data, resp.StatusCode, se
	}
	return data, resp.StatusCode, nil
}

func (c *client) getJSON(ctx context.Context, path string, out any) ([]byte, error) {
	data, _, err := c.do(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return data, err
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return data, fmt.Errorf("decode answer of %s: %w", path, err)
		}
	}
	return data, nil
}

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

func escape(s string) string { return url.PathEscape(s) }

func withTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
