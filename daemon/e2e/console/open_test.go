package console

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// Issue 33 case 1: `lifecycled ui --open` ran `xdg-open URL` with the
// one-time token in the URL, where any local user reads it from
// /proc/PID/cmdline and redeems it first. The browser is now given a file
// only its user can read, which holds the redirect; no command line
// carries the token.
func TestUIOpenPutsNoTokenOnACommandLine(t *testing.T) {
	t.Parallel()
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{})
	// A stand-in for xdg-open that records what it was given and what the
	// file it was given holds.
	bin := t.TempDir()
	record := filepath.Join(t.TempDir(), "xdg-open.args")
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + record + ".tmp\nmv " + record + ".tmp " + record + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(bin, "xdg-open"), []byte(script), 0o755))

	cmd, url := startUI(t, d, nil, []string{"PATH=" + bin + ":" + os.Getenv("PATH")}, "--open")
	token := url[strings.Index(url, "token=")+len("token="):]

	var (
		args []byte
		err  error
	)
	testsvc.Eventually(t, 30*time.Second, func() bool {
		args, err = os.ReadFile(record)
		return err == nil
	}, "xdg-open was run")
	require.NotContains(t, string(args), token, "the token is on no command line")
	file := strings.TrimSpace(string(args))
	require.True(t, filepath.IsAbs(file), "xdg-open is given a file: %q", file)
	st, err := os.Stat(file)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "only its user reads the file")
	dir, err := os.Stat(filepath.Dir(file))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), dir.Mode().Perm(), "in a directory only its user enters")
	body, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Contains(t, string(body), token, "the file holds the redirect")

	// A browser opening the file lands in the console, signed in.
	tb := tab(t, time.Minute)
	do(t, tb, chromedp.Navigate("file://"+file), chromedp.WaitVisible(chromedp.CSS(`nav a[href="/ui/dlq"]`)))
	require.Contains(t, text(t, tb, "body"), "Readiness", "the overview, not a refusal")

	// The file is gone when the console stops.
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	_ = cmd.Wait()
	_, err = os.Stat(file)
	require.True(t, os.IsNotExist(err), "the file is removed: %v", err)
}
