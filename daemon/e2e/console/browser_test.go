package console

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
)

var (
	browserOnce   sync.Once
	browserCtx    context.Context
	browserCancel context.CancelFunc = func() {}
	browserErr    error
	browserDir    string
)

func TestMain(m *testing.M) {
	code := m.Run()
	browserCancel()
	if browserDir != "" {
		os.RemoveAll(browserDir)
	}
	os.Exit(code)
}

// browser starts the package's one Chromium on first use, with the flags
// that work in a container without a display or a sandbox, and a fresh
// profile; nothing it does reaches the network.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := testsvc.Tool(t, "chromium", "make test-deps installs Debian's chromium")
	browserOnce.Do(func() {
		browserDir, browserErr = os.MkdirTemp("", "lcd-chromium-")
		if browserErr != nil {
			return
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path),
			chromedp.NoSandbox,
			chromedp.DisableGPU,
			chromedp.UserDataDir(browserDir),
			chromedp.WindowSize(1280, 800),
			chromedp.Flag("disable-quic", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true),
		)
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancelCtx := chromedp.NewContext(alloc)
		browserErr = chromedp.Do(ctx) // starts the browser
		browserCtx = ctx
		browserCancel = func() { cancelCtx(); cancelAlloc() }
	})
	require.NoError(t, browserErr, "start chromium")
	return browserCtx
}

// tab is a new tab in a browser context of its own (its own cookie jar),
// closed with the test; every action under it ends after d.
func tab(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser(t), chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	require.NoError(t, chromedp.Do(ctx), "open a tab")
	tctx, tcancel := context.WithTimeout(ctx, d)
	t.Cleanup(tcancel)
	return tctx
}

// ui runs `lifecycled ui` against the daemon as an operator would and
// returns the URL it prints first, and the command's base address.
func ui(t *testing.T, d *testsvc.Daemon, cred *syscall.Credential) (url, base string) {
	t.Helper()
	_, url = startUI(t, d, cred, nil)
	return url, url[:strings.Index(url, "/ui/")]
}

// startUI runs `lifecycled ui` with more arguments and environment (nil
// for none) and returns the command and the URL it printed; the command is
// interrupted at the test's end.
func startUI(t *testing.T, d *testsvc.Daemon, cred *syscall.Credential, env []string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(d.Bin, "lifecycled"), append([]string{"--addr", "unix://" + d.Socket, "ui"}, args...)...)
	cmd.Dir = d.Dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: cred}
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	// Read while the command writes it: a buffer safe for both.
	stderr := &testsvc.SyncBuffer{}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("lifecycled ui stderr:\n%s", stderr.String())
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "lifecycled ui printed no URL; stderr: %s", stderr.String())
	url := strings.TrimSpace(line)
	require.Regexp(t, `^http://127\.[0-9]+\.[0-9]+\.[0-9]+:[0-9]+/ui/\?token=[A-Za-z0-9_-]{43}$`, url, "the first line is the URL")
	return cmd, url
}

// shot takes a screenshot of the whole page: it must be a PNG. With
// LIFECYCLED_SCREENSHOTS=DIR (make screenshots: docs/console) it is kept
// there as NAME.png. Every page shot is also checked for form controls
// without a label (a screen reader could not name them).
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	unlabelled, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll(
		"input:not([type=hidden]), select, textarea")).filter(e => e.labels.length === 0 && !e.getAttribute("aria-label")).map(e => e.outerHTML)`))
	require.NoError(t, err)
	require.Empty(t, unlabelled, "%s: form controls without a label", name)
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err, "screenshot %s", name)
	require.True(t, bytes.HasPrefix(png, []byte("\x89PNG")), "screenshot %s is a PNG", name)
	if dir := os.Getenv("LIFECYCLED_SCREENSHOTS"); dir != "" {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
	}
}

// text is the text of the first element sel matches, once it is there.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	require.NoError(t, err, "text of %s", sel)
	return s
}

// waitJS waits until a JavaScript expression is true in the page (no
// sleeps: the browser evaluates it on every animation frame).
func waitJS(t *testing.T, ctx context.Context, expr string, format string, args ...any) {
	t.Helper()
	_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(0)))
	require.NoError(t, err, "waiting for %s: %s", fmt.Sprintf(format, args...), expr)
}

// do runs browser actions, each step given 30 s; when one fails, the test
// fails with the page's URL and text, which say what the console showed.
// A click that loads a page must be followed by a wait for something only
// the new page has: the next step would otherwise find the old one.
func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	for i, s := range steps {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := chromedp.Do(sctx, s)
		cancel()
		if err != nil {
			loc, _ := chromedp.Run(ctx, chromedp.Location())
			body, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("document.body ? document.body.innerText : ''"))
			t.Fatalf("browser step %d failed: %v\npage %s:\n%s", i+1, err, loc, body)
		}
	}
}
