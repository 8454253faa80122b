// Command misbehave is a TenantDeleter plugin for the daemon's own tests: it
// keeps counts in memory and misbehaves on request (TESTPLUGIN_MODE, passed
// through [plugins] env), so that the plugin host's handling of slow starts,
// protocol mismatches, panics, crashes and secret leaks can be tested against
// a real process.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/host"
	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

type deleter struct {
	mu       sync.Mutex
	items    map[string]int64
	password string
}

func (d *deleter) mode(m string) bool {
	for _, x := range strings.Split(os.Getenv("TESTPLUGIN_MODE"), ",") {
		if x == m {
			return true
		}
	}
	return false
}

// Health answers as the file TESTPLUGIN_HEALTH says, read at each call so
// that a test can change the store's health under a running plugin:
// missing or "up" is up, "down" a store error, "slow" no answer for 10 s,
// "unsupported" a plugin that cannot probe.
func (d *deleter) Health(ctx context.Context) error {
	b, _ := os.ReadFile(os.Getenv("TESTPLUGIN_HEALTH"))
	switch strings.TrimSpace(string(b)) {
	case "down":
		return sdk.Unavailable(errors.New("dial tcp 127.0.0.1:1: connect: connection refused"))
	case "slow":
		select {
		case <-time.After(10 * time.Second):
		case <-ctx.Done():
		}
		return ctx.Err()
	case "unsupported":
		return sdk.Unsupported(errors.New("no probe"))
	}
	return nil
}

func (d *deleter) Configure(_ context.Context, req *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.items = map[string]int64{}
	if seed, ok := req.Config["seed"].(map[string]any); ok {
		for k, v := range seed {
			n, _ := v.(float64)
			d.items[k] = int64(n)
		}
	}
	d.password, _ = req.Config["password"].(string)
	sdk.Logger().Info("configured", "name", req.Name)
	if d.mode("leak-secret") {
		sdk.Logger().Error("cannot log in with password " + d.password)
		return nil, sdk.Retryable(fmt.Errorf("login failed for user app with password %s at postgres://app:%s@db/app", d.password, d.password), 0)
	}
	if d.mode("bad-config") {
		return nil, sdk.InvalidConfig(sdk.FieldError{Field: "dsn", Problem: "required"})
	}
	if d.mode("format-version") {
		return &sdk.ConfigureResponse{PluginVersion: "format=" + req.TenantIDFormat}, nil
	}
	if d.mode("env-version") {
		// Report which environment variables the plugin can see.
		var names []string
		for _, kv := range os.Environ() {
			name, _, _ := strings.Cut(kv, "=")
			if !strings.HasPrefix(name, "PLUGIN_") && name != host.Handshake.MagicCookieKey {
				names = append(names, name)
			}
		}
		return &sdk.ConfigureResponse{PluginVersion: strings.Join(names, ",")}, nil
	}
	return &sdk.ConfigureResponse{PluginVersion: "test-1"}, nil
}

func (d *deleter) Count(ctx context.Context, req *sdk.CountRequest) (*sdk.CountResponse, error) {
	switch {
	case d.mode("panic-count"):
		panic("count exploded for " + req.TenantID)
	case d.mode("crash-count"):
		go func() { panic("a goroutine panicked outside any handler") }()
		time.Sleep(time.Second)
	case d.mode("exit-count"):
		os.Exit(3)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return &sdk.CountResponse{Count: d.items[req.TenantID]}, nil
}

// Delete removes one item every 50 ms, so tests can act in the middle.
func (d *deleter) Delete(ctx context.Context, req *sdk.DeleteRequest, progress sdk.Progress) (*sdk.DeleteResponse, error) {
	var deleted int64
	for {
		d.mu.Lock()
		left := d.items[req.TenantID]
		if left > 0 {
			d.items[req.TenantID] = left - 1
			deleted++
		}
		d.mu.Unlock()
		if left == 0 {
			return &sdk.DeleteResponse{DeletedCount: deleted}, nil
		}
		progress(deleted)
		select {
		case <-ctx.Done():
			return nil, sdk.PartialDeletion(deleted, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// forkChild starts a process that inherits the plugin's stdout and stderr
// and outlives it (a plugin that runs a helper and forgets it), writing the
// child's pid to TESTPLUGIN_PIDFILE.
func forkChild() {
	cmd := exec.Command("/bin/sleep", "600")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	if name := os.Getenv("TESTPLUGIN_PIDFILE"); name != "" {
		f, err := os.OpenFile(name, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			fmt.Fprintln(f, cmd.Process.Pid)
			f.Close()
		}
	}
}

func main() {
	d := &deleter{}
	if d.mode("fork-child") || d.mode("fork-child-exit") {
		forkChild()
		if d.mode("fork-child-exit") {
			os.Exit(2)
		}
	}
	if d.mode("slow-start") {
		time.Sleep(30 * time.Second)
	}
	if d.mode("protocol-4") {
		serveHandshakeOnly(4, sdk.KindTenantDeleter, func(s *grpc.Server) {
			pb.RegisterTenantDeleterServer(s, pb.UnimplementedTenantDeleterServer{})
		})
		return
	}
	if d.mode("source-protocol-1") {
		// A DLQ source built against the protocol 1 SDK.
		serveHandshakeOnly(1, sdk.KindDLQSource, func(s *grpc.Server) {
			pb.RegisterDLQSourceServer(s, pb.UnimplementedDLQSourceServer{})
		})
		return
	}
	sdk.ServeTenantDeleter(d)
}

// serveHandshakeOnly serves kind under protocol version alone. The daemon
// refuses both versions it is used with before it calls a method, so the
// service behind it answers none: what the test looks at is the handshake.
func serveHandshakeOnly(version int, kind string, register func(*grpc.Server)) {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  host.Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{version: {kind: handshakeOnly{register: register}}},
		GRPCServer:       plugin.DefaultGRPCServer,
	})
}

// handshakeOnly is go-plugin glue for the plugin's end of serveHandshakeOnly.
type handshakeOnly struct {
	plugin.NetRPCUnsupportedPlugin
	register func(*grpc.Server)
}

func (p handshakeOnly) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	p.register(s)
	return nil
}

func (handshakeOnly) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, errors.New("the plugin's end only")
}
