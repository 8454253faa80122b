package app

import (
	"net/http"

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
	"github.com/lifecycled/lifecycled/daemon/internal/store"
)

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
