package pluginhost

import (
	"context"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/lifecycled/lifecycled/daemon/internal/retry"
	"github.com/lifecycled/lifecycled/sdk"
)

// State of a plugin instance.
type State string

// States.
const (
	StateStarting   State = "starting"
	StateRunning    State = "running"
	StateRestarting State = "restarting" // crashed; waiting to be started again
	StateFailed     State = "failed"     // could not be started; retried with backoff
	StateStopped    State = "stopped"
)

// Info is the state of one plugin; the admin API renders it
// (wire.Plugin).
type Info struct {
	Name       string
	Kind       string
	Plugin     string
	Path       string
	SHA256     string
	Version    string
	State      State
	Restarts   int
	LastError  string
	StderrTail []string
	PID        int
	StartedAt  *time.Time
	Warnings   []string
	// Store is the plugin's store as the last probe found it.
	Store StoreHealth
}

// stableAfter is how long a plugin must run before a later crash starts the
// restart backoff from the beginning again.
const stableAfter = time.Minute

type instance struct {
	cfg     Plugin
	log     hclog.Logger
	metrics *metrics
	stderr  *tailBuffer

	mu        sync.Mutex
	client    *plugin.Client
	cmd       *exec.Cmd
	deleter   sdk.TenantDeleter
	source    sdk.DLQSource
	state     State
	restarts  int
	lastErr   string
	version   string
	warnings  []string
	traits    sdk.SourceTraits // a DLQ source's, from its Configure
	sum       string
	pid       int
	startedAt *time.Time
	store     StoreHealth

	// refused is the permanent error Configure answered at the last start
	// (an invalid config, a schema no deletion can work with); nil after a
	// start that succeeded. A deleter's callers get it rather than "not
	// running": no retry can help until the config or the store changes.
	refused error

	kick         chan struct{}
	stopCh       chan struct{}
	stopOnce     sync.Once
	done         chan struct{}
	firstAttempt chan struct{}
}

func newInstance(cfg Plugin, log hclog.Logger, m *metrics) *instance {
	// Known label sets start at 0, so that rate() and alerts see the
	// series before the first restart.
	m.restarts.WithLabelValues(cfg.Name)
	return &instance{
		cfg: cfg, log: log, metrics: m, stderr: newTailBuffer(20),
		state: StateStarting, store: StoreHealth{State: StoreUnknown, Error: "not probed yet"}, kick: make(chan struct{}, 1), stopCh: make(chan struct{}),
		done: make(chan struct{}), firstAttempt: make(chan struct{}),
	}
}

func (in *instance) status() Info {
	in.mu.Lock()
	defer in.mu.Unlock()
	info := Info{
		Name: in.cfg.Name, Kind: string(in.cfg.Kind), Plugin: in.cfg.Plugin, Path: in.cfg.Path, SHA256: in.sum,
		Version: in.version, State: in.state, Restarts: in.restarts, LastError: in.lastErr,
		StderrTail: in.stderr.Lines(), StartedAt: in.startedAt, Warnings: in.warnings, Store: in.store,
	}
	if in.state == StateRunning {
		info.PID = in.pid
	}
	return info
}

func (in *instance) setState(s State, errMsg string) {
	in.mu.Lock()
	in.state = s
	if errMsg != "" {
		in.lastErr = errMsg
	}
	in.mu.Unlock()
	up := 0.0
	if s == StateRunning {
		up = 1
	}
	in.metrics.up.WithLabelValues(in.cfg.Name, string(in.cfg.Kind)).Set(up)
}

// notifyFailure tells the supervisor a call failed at the transport level,
// so that it checks the process now rather than at its next poll.
func (in *instance) notifyFailure() {
	select {
	case in.kick <- struct{}{}:
	default:
	}
}

// supervise runs the instance until stop: launch, watch, relaunch.
func (in *instance) supervise() {
	defer close(in.done)
	policy := retry.Policy{Initial: in.cfg.RestartInitial, Multiplier: 2, Max: in.cfg.RestartMax, Jitter: retry.JitterEqual}
	attempt := 0
	first := true
	for {
		err := in.launch()
		if err != nil {
			in.log.Error("plugin failed to start", "error", err, "path", in.cfg.Path)
			in.setState(StateFailed, err.Error())
		}
		if first {
			close(in.firstAttempt)
			first = false
		}
		if err == nil {
			since := time.Now()
			reason := in.watch()
			in.teardown()
			if reason == "" { // stopped
				in.setState(StateStopped, "")
				return
			}
			in.log.Error("plugin stopped unexpectedly; restarting", "reason", reason, "stderr_tail", in.stderr.Tail(5))
			in.setState(StateRestarting, reason)
			if time.Since(since) > stableAfter {
				attempt = 0
			}
		}
		delay := policy.Delay(attempt)
		attempt++
		select {
		case <-in.stopCh:
			in.setState(StateStopped, "")
			return
		case <-time.After(delay):
		}
		in.mu.Lock()
		in.restarts++
		in.mu.Unlock()
		in.metrics.restarts.WithLabelValues(in.cfg.Name).Inc()
	}
}

// watch waits until the plugin process exits (reason) or stop ("").
func (in *instance) watch() string {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		ping := false
		select {
		case <-in.stopCh:
			return ""
		case <-tick.C:
		case <-in.kick:
			ping = true // a call failed at the transport level
		}
		in.mu.Lock()
		c := in.client
		in.mu.Unlock()
		if c.Exited() {
			return "plugin process exited"
		}
		if ping {
			if proto, err := c.Client(); err != nil || proto.Ping() != nil {
				return "plugin stopped answering"
			}
		}
	}
}

// stop ends the supervisor and the process, waiting up to the shutdown
// timeout for a clean exit before killing it.
func (in *instance) stop(ctx context.Context) {
	in.stopOnce.Do(func() { close(in.stopCh) })
	select {
	case <-in.done:
	case <-ctx.Done():
		in.hardKill()
	}
}

func (in *instance) teardown() {
	in.mu.Lock()
	c, cmd := in.client, in.cmd
	in.client, in.deleter, in.source = nil, nil, nil
	in.mu.Unlock()
	if c == nil {
		return
	}
	in.shutdown(c, cmd, in.cfg.ShutdownTimeout)
}

// killGrace is how long go-plugin's Kill may take once the plugin's whole
// process group has been killed.
const killGrace = 5 * time.Second

// shutdown asks the plugin to exit (go-plugin's Kill) and, if it has not
// within grace, kills its whole process group. go-plugin's Kill waits until
// the plugin's stdout and stderr close, and a child the plugin started
// keeps them open for as long as it lives: killing only the plugin wedged
// the supervisor (and the daemon's start or stop) and left the child
// running. shutdown never blocks for longer than grace + killGrace.
func (in *instance) shutdown(c *plugin.Client, cmd *exec.Cmd, grace time.Duration) {
	done := make(chan struct{})
	go func() {
		c.Kill()
		close(done)
	}()
	select {
	case <-done:
		killGroup(cmd) // children the plugin left behind
		return
	case <-time.After(grace):
	}
	killGroup(cmd)
	select {
	case <-done:
	case <-time.After(killGrace):
		in.log.Error("plugin did not release its output after its process group was killed; abandoning it", "path", in.cfg.Path)
	}
}

// killGroup kills the plugin and every process in its group (it runs in a
// group of its own, see launch).
func killGroup(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Process.Kill()
}

func (in *instance) hardKill() {
	in.mu.Lock()
	cmd := in.cmd
	in.mu.Unlock()
	killGroup(cmd)
}
