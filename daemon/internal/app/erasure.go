package app

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/lifecycled/lifecycled/daemon/internal/adminapi"
	"github.com/lifecycled/lifecycled/daemon/internal/config"
	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/ledger"
	"github.com/lifecycled/lifecycled/daemon/internal/periodic"
	"github.com/lifecycled/lifecycled/daemon/internal/pluginhost"
	"github.com/lifecycled/lifecycled/daemon/internal/receipt"
	"github.com/lifecycled/lifecycled/daemon/internal/retry"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
)

func newDeletion(lc fx.Lifecycle, holder *config.Holder, log hclog.Logger, reg prometheus.Registerer,
	st store.Store, host *pluginhost.Host, id daemonID, pm *periodic.Metrics, notary *receipt.Notary) (*deletion.Service, error) {
	registry := deletion.NewRegistry(host, func() int { return holder.Get().Deletion.Concurrency })
	runner := deletion.NewRunner(st, registry, string(id), func() deletion.RunnerConfig {
		cfg := holder.Get()
		d := cfg.Deletion
		return deletion.RunnerConfig{
			PollInterval:   d.PollInterval.Duration,
			Lease:          d.Lease.Duration,
			RetryPolicy:    retry.Policy{Initial: d.RetryInitialDelay.Duration, Multiplier: 2, Max: d.RetryMaxDelay.Duration, Jitter: retry.JitterEqual},
			Verify:         d.Verify,
			TenantIDFormat: cfg.Daemon.TenantIDFormat,
			MaxJobs:        d.MaxJobs,
			Notary:         notary,
		}
	}, log, reg, pm)
	lc.Append(fx.Hook{OnStart: runner.Start, OnStop: runner.Stop})
	return deletion.NewService(st, registry, runner, deletion.ServiceOptions{
		Config: func() deletion.ServiceConfig {
			cfg := holder.Get()
			return deletion.ServiceConfig{TenantIDFormat: cfg.Daemon.TenantIDFormat, GracePeriod: cfg.Deletion.GracePeriod.Duration,
				RequireApproval: cfg.Deletion.RequireApproval, ApproversDistinct: cfg.Deletion.ApproversDistinct}
		},
		Notary: notary,
	}), nil
}

// newNotary loads (or at first start generates) the receipt key and
// registers its public half in the state store, where every daemon of the
// store can serve it. A key that cannot be had stops the start: a daemon
// that erases without proof would be worse than one that does not start.
func newNotary(holder *config.Holder, log hclog.Logger, st store.Store, host *pluginhost.Host, id daemonID) (*receipt.Notary, error) {
	path, generate := holder.Get().ReceiptKeyPath()
	var (
		key     ed25519.PrivateKey
		created bool
		err     error
	)
	if generate {
		key, created, err = receipt.LoadOrGenerate(path)
	} else {
		key, err = receipt.LoadKey(path)
	}
	if err != nil {
		return nil, &ConfigError{Err: fmt.Errorf("deletion.receipt_key_file: %w (make one with `lifecycled receipt keygen FILE`)", err)}
	}
	pub := key.Public().(ed25519.PublicKey)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := st.RegisterReceiptKey(ctx, deletion.ReceiptKey{ID: receipt.KeyID(pub), Algorithm: receipt.Algorithm,
		PublicKey: pub, RegisteredAt: time.Now()}); err != nil {
		return nil, err
	}
	log.Named("deletion").Info("receipt key ready", "key_id", receipt.KeyID(pub), "path", path, "generated", created)
	return receipt.NewNotary(key, string(id), func() map[string]receipt.Plugin { return receiptPlugins(holder.Get(), host, log) }), nil
}

// receiptPlugins says, per deleter, which plugin binary runs it (version
// and SHA-256 as the plugin host saw them at its start) and the
// fingerprint of its config.
func receiptPlugins(cfg *config.Config, host *pluginhost.Host, log hclog.Logger) map[string]receipt.Plugin {
	out := map[string]receipt.Plugin{}
	for _, d := range cfg.Deleters {
		fp, err := receipt.ConfigFingerprint(d.Name, d.Plugin, d.Config)
		if err != nil {
			log.Named("deletion").Error("fingerprint deleter config", "deleter", d.Name, "error", err)
		}
		out[d.Name] = receipt.Plugin{Plugin: d.Plugin, ConfigSHA256: fp}
	}
	for _, info := range host.Status() {
		if p, ok := out[info.Name]; ok {
			p.Version, p.SHA256 = info.Version, info.SHA256
			out[info.Name] = p
		}
	}
	return out
}

func tenantRoutes(svc *deletion.Service, l *ledger.Service) func(*http.ServeMux) {
	return adminapi.TenantRoutesWith(svc, l)
}

func deletionRoutes(svc *deletion.Service) func(*http.ServeMux) { return adminapi.DeletionRoutes(svc) }

func holdRoutes(svc *deletion.Service) func(*http.ServeMux) { return adminapi.HoldRoutes(svc) }

func receiptRoutes(svc *deletion.Service) func(*http.ServeMux) { return adminapi.ReceiptRoutes(svc) }

func planRoutes(svc *deletion.Service) func(*http.ServeMux) { return adminapi.PlanRoutes(svc) }

// newLedger wires the erasure ledger: its export and import, and the
// background re-verification, which counts with the same plugins as the
// deletion jobs (a registry of its own over the plugin host) and queues
// re-erase jobs for the deletion runner.
func newLedger(lc fx.Lifecycle, holder *config.Holder, log hclog.Logger, reg prometheus.Registerer, st store.Store,
	host *pluginhost.Host, id daemonID, pm *periodic.Metrics, del *deletion.Service, notary *receipt.Notary) *ledger.Service {
	counter := deletion.NewRegistry(host, func() int { return holder.Get().Deletion.Concurrency })
	rv := ledger.NewReverifier(st, counter, string(id), func() ledger.ReverifyConfig {
		cfg := holder.Get()
		d := cfg.Deletion
		// The lease outlives the slowest single count (a plugin call may
		// take call_timeout), so that a slow store does not hand the pass
		// to another daemon in the middle of one tenant.
		lease := max(d.Lease.Duration, 2*cfg.Plugins.CallTimeout.Duration)
		return ledger.ReverifyConfig{Interval: d.ReverifyInterval.Duration, Rate: d.ReverifyRate, Reerase: d.Reerase,
			RequireApproval: d.RequireApproval, Lease: lease, TenantIDFormat: cfg.Daemon.TenantIDFormat}
	}, del.Kick, log, reg, pm)
	lc.Append(fx.Hook{OnStart: rv.Start, OnStop: rv.Stop})
	return ledger.NewService(st, st, notary, string(id), func() string { return holder.Get().Daemon.TenantIDFormat }, rv)
}

func ledgerRoutes(svc *ledger.Service) func(*http.ServeMux) { return adminapi.LedgerRoutes(svc) }
