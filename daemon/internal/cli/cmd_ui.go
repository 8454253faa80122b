package cli

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/lifecycled/lifecycled/daemon/internal/console"
)

// uiCmd serves the web console on a loopback port for a browser, as a
// proxy to the admin socket that runs as the caller (the daemon's access
// policy and audit see the caller's uid).
func uiCmd(g *globals) *cobra.Command {
	var listen string
	var open bool
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve the web console on 127.0.0.1 and print the URL to open (with a one-time token)",
		Long: `Serve the web console on a free loopback port (--listen to choose one, for
example for an SSH tunnel) as a proxy to the admin socket, running as you: the
daemon applies its access policy to your uid (read_only_uids see no controls)
and audits what you do as coming through the console.

The first line of standard output is the URL to open. Its token works once:
it becomes a session key the page keeps in its origin's storage (no cookie,
which other ports of 127.0.0.1 would receive) and sends as a header; every
request without it is refused (401) and every change carries a CSRF token. Serves until interrupted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(10 * time.Second)
			_, err = c.Healthz(ctx)
			cancel()
			if err != nil {
				return err
			}
			l, err := listenConsole(listen)
			if err != nil {
				return err
			}
			defer l.Close()
			addr := l.Addr().(*net.TCPAddr)
			if !addr.IP.IsLoopback() {
				fmt.Fprintf(g.stderr, "lifecycled ui: warning: listening on %s, which is not a loopback address: anyone who can reach it and has the URL can act as you\n", addr)
			}
			proxy, err := console.NewProxy(c.path)
			if err != nil {
				return err
			}
			host := addr.IP.String()
			if addr.IP.IsUnspecified() {
				host = "127.0.0.1"
			}
			url := fmt.Sprintf("http://%s/ui/?token=%s", net.JoinHostPort(host, fmt.Sprint(addr.Port)), proxy.Token())
			fmt.Fprintln(g.stdout, url)
			fmt.Fprintf(g.stderr, "lifecycled ui: serving the console of %s; open the URL above (its token works once); Ctrl-C stops\n", c.addr)
			if open {
				file, remove, err := redirectFile(url)
				if err == nil {
					defer remove()
					err = exec.Command("xdg-open", file).Start()
				}
				if err != nil {
					fmt.Fprintf(g.stderr, "lifecycled ui: --open: %v; open the URL by hand\n", err)
				}
			}
			srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
			sig, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			errc := make(chan error, 1)
			go func() { errc <- srv.Serve(l) }()
			select {
			case err := <-errc:
				if !errors.Is(err, http.ErrServerClosed) {
					return localErrorf("serve: %v", err)
				}
			case <-sig.Done():
				sctx, scancel := withTimeout(5 * time.Second)
				defer scancel()
				_ = srv.Shutdown(sctx)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "", "address to serve on (host:port; port 0 picks a free one); default: a random address of 127.0.0.0/8 and a free port, an origin no one can have served before; keep it on loopback and tunnel with ssh -L")
	cmd.Flags().BoolVar(&open, "open", false, "open the console in a browser (xdg-open) through a redirect in a file only you can read: the token goes on no command line")
	return cmd
}

// listenConsole listens on addr, or by default on a random address of
// 127.0.0.0/8 (Linux answers on all of it) with a free port. The console's
// origin is then one no local user can have served before: whoever served
// a fixed origin (127.0.0.1:8080) earlier may have left a cached script or
// a service worker for it in the operator's browser, which would read the
// session key. Where the random address is refused, 127.0.0.1.
func listenConsole(addr string) (net.Listener, error) {
	if addr != "" {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, localErrorf("listen on %s: %v", addr, err)
		}
		return l, nil
	}
	var b [3]byte
	if _, err := rand.Read(b[:]); err == nil {
		// Not 127.0.0.x, the addresses other programs pick, nor .0 or .255.
		b[0] = 1 + b[0]%254
		b[2] = 1 + b[2]%254
		if l, err := net.Listen("tcp", net.JoinHostPort(net.IPv4(127, b[0], b[1], b[2]).String(), "0")); err == nil {
			return l, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, localErrorf("listen on 127.0.0.1: %v", err)
	}
	return l, nil
}

// redirectFile writes a page that sends the browser to url into a file
// only this user can read (0600, in a new 0700 directory), and returns its
// path and how to remove it. The browser is given the file, never the URL:
// a command line is readable by every local user (/proc/PID/cmdline), who
// would redeem the one-time token first. Jupyter opens its console so.
func redirectFile(url string) (path string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "lifecycled-ui-")
	if err != nil {
		return "", nil, localErrorf("a directory for the redirect: %v", err)
	}
	remove = func() { _ = os.RemoveAll(dir) }
	esc := html.EscapeString(url)
	page := `<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=` + esc + `">` +
		`<title>lifecycled console</title><p><a href="` + esc + `">Open the lifecycled console</a></p>`
	path = filepath.Join(dir, "open.html")
	if err := os.WriteFile(path, []byte(page), 0o600); err != nil {
		remove()
		return "", nil, localErrorf("write the redirect: %v", err)
	}
	return path, remove, nil
}
