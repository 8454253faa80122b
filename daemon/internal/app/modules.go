package app

import (
	"net/http"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/lifecycled/lifecycled/daemon/internal/adminapi"
	"github.com/lifecycled/lifecycled/daemon/internal/config"
	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/pluginhost"
	"github.com/lifecycled/lifecycled/daemon/internal/retry"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
)

// modules returns the fx options of the daemon's jobs. Each contributes
// admin routes (group "admin_routes") and registers its background loops
// with the lifecycle, so they start after the store and plugins and stop
// before them.
func modules() fx.Option {
	return fx.Options(
		fx.Provide(
			newDeletion,
			fx.Annotate(tenantRoutes, fx.ResultTags(`group:"admin_routes"`)),
		),
	)
}

func newDeletion(lc fx.Lifecycle, holder *config.Holder, log hclog.Logger, reg prometheus.Registerer,
	st store.Store, host *pluginhost.Host, id daemonID) *deletion.Service {
	registry := deletion.NewRegistry(host, func() int { return holder.Get().Deletion.Concurrency })
	runner := deletion.NewRunner(st, registry, string(id), func() deletion.RunnerConfig {
		d := holder.Get().Deletion
		return deletion.RunnerConfig{
			PollInterval: d.PollInterval.Duration,
			Lease:        d.Lease.Duration,
			RetryPolicy:  retry.Policy{Initial: d.RetryInitialDelay.Duration, Multiplier: 2, Max: d.RetryMaxDelay.Duration, Jitter: retry.JitterEqual},
			Verify:       d.Verify,
		}
	}, log, reg)
	lc.Append(fx.Hook{OnStart: runner.Start, OnStop: runner.Stop})
	return deletion.NewService(st, registry, runner, func() string { return holder.Get().Daemon.TenantIDFormat })
}

func tenantRoutes(svc *deletion.Service) func(*http.ServeMux) {
	return adminapi.TenantRoutes(svc)
}
