package pluginhost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/host"
)

// Starting a plugin process: the trust checks on its binary, the handshake
// and protocol negotiation, Configure, and what an operator is told when
// one of them fails.

var protoMismatchRE = regexp.MustCompile(`Plugin version: (\d+), Client versions: \[([\d ]*)\]`)

// launch starts the process, completes the handshake, dispenses the plugin
// and configures it.
func (in *instance) launch() error {
	in.setState(StateStarting, "")
	err := checkTrust(in.cfg.Path, in.cfg.PluginDir)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("plugin %s: binary %s not found (is plugin_dir right? `make build` puts plugins in ./bin)", in.cfg.Name, in.cfg.Path)
	}
	if err != nil {
		return fmt.Errorf("plugin %s: %w", in.cfg.Name, err)
	}
	sum, err := fileSHA256(in.cfg.Path)
	if err != nil {
		return fmt.Errorf("plugin %s: read binary: %w", in.cfg.Name, err)
	}
	in.mu.Lock()
	in.sum = sum
	in.mu.Unlock()

	cmd := exec.Command(in.cfg.Path)
	cmd.Env = allowedEnv(in.cfg.Env)
	if in.cfg.GOMAXPROCS > 0 {
		cmd.Env = append(cmd.Env, "GOMAXPROCS="+strconv.Itoa(in.cfg.GOMAXPROCS))
	}
	// Both ends of the connection use the same message limit.
	if in.cfg.MaxMessageBytes > 0 {
		cmd.Env = append(cmd.Env, host.MaxMessageBytesEnv+"="+strconv.Itoa(in.cfg.MaxMessageBytes))
	}
	// Linux kills the plugin when the daemon dies, even by SIGKILL. Its own
	// process group lets shutdown kill whatever the plugin started too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	cc := &plugin.ClientConfig{
		HandshakeConfig:  host.Handshake,
		VersionedPlugins: host.PluginSets(in.cfg.MaxMessageBytes),
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		Managed:          true,
		SkipHostEnv:      true,
		StartTimeout:     in.cfg.StartTimeout,
		Logger:           in.log,
		Stderr:           in.stderr,
		GRPCDialOptions:  host.DialOptions(in.cfg.MaxMessageBytes),
	}
	if want := in.cfg.SHA256; want != "" {
		wantBytes, _ := hex.DecodeString(want)
		cc.SecureConfig = &plugin.SecureConfig{Checksum: wantBytes, Hash: sha256.New()}
	}
	client := plugin.NewClient(cc)
	in.mu.Lock()
	in.client, in.cmd = client, cmd
	in.mu.Unlock()
	fail := func(err error) error {
		in.shutdown(client, cmd, 0) // a plugin that failed to start gets no grace
		in.mu.Lock()
		in.client = nil
		in.mu.Unlock()
		return fmt.Errorf("plugin %s: %w", in.cfg.Name, err)
	}

	proto, err := client.Client()
	if err != nil {
		return fail(in.explainStartError(err, sum))
	}
	kindName := sdk.KindTenantDeleter
	if in.cfg.Kind == KindDLQSource {
		kindName = sdk.KindDLQSource
		if v := client.NegotiatedVersion(); v < sdk.MinSourceProtocolVersion {
			return fail(fmt.Errorf("plugin %s speaks plugin protocol %d, and a DLQ source needs protocol %d or later "+
				"(protocol 1 carries header keys as text and cannot hand back a batch the daemon did not receive, so dead letters could be lost); "+
				"not started: rebuild the plugin against lifecycled's sdk", in.cfg.Path, v, sdk.MinSourceProtocolVersion))
		}
	}
	raw, err := proto.Dispense(kindName)
	if err != nil {
		return fail(fmt.Errorf("plugin %s does not serve a %s: %w", in.cfg.Path, kindName, err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), in.cfg.CallTimeout)
	defer cancel()
	req := &sdk.ConfigureRequest{Name: in.cfg.Name, Config: in.cfg.Config, TenantIDFormat: in.cfg.TenantIDFormat}
	var resp *sdk.ConfigureResponse
	switch p := raw.(type) {
	case sdk.TenantDeleter:
		resp, err = p.Configure(ctx, req)
		in.mu.Lock()
		in.deleter = p
		in.mu.Unlock()
	case sdk.DLQSource:
		resp, err = p.Configure(ctx, req)
		if err == nil {
			if terr := resp.Source.Check(); terr != nil {
				err = &sdk.Error{Class: sdk.ClassPermanent, Code: sdk.CodeInternal,
					Message: fmt.Sprintf("plugin %s: %v; not started: a source must say how it acknowledges and identifies messages (docs/plugin-protocol.md)", in.cfg.Path, terr)}
			}
		}
		in.mu.Lock()
		in.source = p
		if err == nil {
			in.traits = resp.Source
		}
		in.mu.Unlock()
	default:
		return fail(fmt.Errorf("plugin dispensed an unexpected %T", raw))
	}
	if err != nil {
		if sdk.ClassOf(err) == sdk.ClassPermanent {
			in.mu.Lock()
			in.refused = err
			in.mu.Unlock()
		}
		return fail(fmt.Errorf("configure: %w", err))
	}
	now := time.Now().UTC()
	pid := 0
	if rc := client.ReattachConfig(); rc != nil {
		pid = rc.Pid
	}
	in.mu.Lock()
	in.version, in.warnings, in.startedAt, in.pid = resp.PluginVersion, resp.Warnings, &now, pid
	in.refused = nil
	in.mu.Unlock()
	for _, w := range resp.Warnings {
		in.log.Warn("plugin warning", "warning", w)
	}
	in.setState(StateRunning, "")
	in.log.Info("plugin running", "version", resp.PluginVersion, "pid", pid, "protocol", client.NegotiatedVersion())
	return nil
}

func (in *instance) explainStartError(err error, actual string) error {
	switch {
	case errors.Is(err, plugin.ErrChecksumsDoNotMatch):
		return fmt.Errorf("checksum mismatch for %s: config sha256 = %s, file sha256 = %s; not started (replace the binary or update sha256)",
			in.cfg.Path, in.cfg.SHA256, actual)
	case protoMismatchRE.MatchString(err.Error()):
		m := protoMismatchRE.FindStringSubmatch(err.Error())
		theirs, _ := strconv.Atoi(m[1])
		// go-plugin lists ours in map order: sort them, so the message is
		// the same every time.
		ours := strings.Fields(m[2])
		sort.Slice(ours, func(i, j int) bool { a, _ := strconv.Atoi(ours[i]); b, _ := strconv.Atoi(ours[j]); return a < b })
		m[2] = strings.Join(ours, " ")
		advice := "rebuild the plugin against lifecycled's sdk"
		if theirs > sdk.ProtocolVersion {
			advice = "upgrade lifecycled to a version that speaks protocol " + m[1]
		}
		return fmt.Errorf("plugin protocol mismatch: %s speaks protocol %d, this lifecycled speaks [%s]; %s",
			in.cfg.Path, theirs, m[2], advice)
	case errors.Is(err, plugin.ErrProcessNotFound):
		return fmt.Errorf("plugin process exited during start: %w; last stderr: %v", err, in.stderr.Tail(3))
	default:
		msg := err.Error()
		if tail := in.stderr.Tail(3); len(tail) > 0 {
			msg += fmt.Sprintf("; last stderr: %q", tail)
		}
		return fmt.Errorf("start plugin %s: %s", in.cfg.Path, msg)
	}
}

func allowedEnv(names []string) []string {
	var env []string
	for _, n := range names {
		if v, ok := os.LookupEnv(n); ok {
			env = append(env, n+"="+v)
		}
	}
	return env
}

// FileSHA256 returns the hex SHA-256 of a file (`lifecycled plugins checksum`).
func FileSHA256(path string) (string, error) { return fileSHA256(path) }

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
