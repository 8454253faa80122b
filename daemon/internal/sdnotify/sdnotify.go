// Package sdnotify tells systemd what the daemon is doing (Type=notify):
// READY=1 once config, state store, plugins and socket are up, RELOADING=1
// with MONOTONIC_USEC on SIGHUP, STOPPING=1 when draining, STATUS= one-line
// summaries and WATCHDOG=1 keep-alives. Outside systemd (no NOTIFY_SOCKET)
// every call is a no-op.
package sdnotify

import (
	"fmt"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"golang.org/x/sys/unix"
)

// Notifier sends sd_notify messages.
type Notifier struct{}

func (Notifier) send(state string) error {
	_, err := daemon.SdNotify(false, state)
	return err
}

// Ready reports that startup finished.
func (n Notifier) Ready(status string) error {
	return n.send(daemon.SdNotifyReady + "\nSTATUS=" + status)
}

// Reloading reports a config reload; systemd 253+ needs MONOTONIC_USEC.
func (n Notifier) Reloading() error {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	usec := ts.Sec*1_000_000 + ts.Nsec/1000
	return n.send(fmt.Sprintf("%s\nMONOTONIC_USEC=%d", daemon.SdNotifyReloading, usec))
}

// Stopping reports that the daemon drains and will exit.
func (n Notifier) Stopping(status string) error {
	return n.send(daemon.SdNotifyStopping + "\nSTATUS=" + status)
}

// Status sets the one-line status shown by systemctl status.
func (n Notifier) Status(status string) error { return n.send("STATUS=" + status) }

// Watchdog sends a keep-alive.
func (n Notifier) Watchdog() error { return n.send(daemon.SdNotifyWatchdog) }

// WatchdogInterval returns how often to send keep-alives (half of
// WatchdogSec), or 0 when the watchdog is off.
func WatchdogInterval() time.Duration {
	d, err := daemon.SdWatchdogEnabled(false)
	if err != nil || d <= 0 {
		return 0
	}
	return d / 2
}
