package app

import (
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/lifecycled/lifecycled/daemon/internal/adminapi"
	"github.com/lifecycled/lifecycled/daemon/internal/archive"
	"github.com/lifecycled/lifecycled/daemon/internal/config"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/bulk"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/intake"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/searchindex"
	"github.com/lifecycled/lifecycled/daemon/internal/periodic"
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
			periodic.New,
			newNotary,
			newDeletion,
			newLedger,
			fx.Annotate(ledgerRoutes, fx.ResultTags(`group:"admin_routes"`)),
			fx.Annotate(tenantRoutes, fx.ResultTags(`group:"admin_routes"`)),
			fx.Annotate(deletionRoutes, fx.ResultTags(`group:"admin_routes"`)),
			fx.Annotate(holdRoutes, fx.ResultTags(`group:"admin_routes"`)),
			fx.Annotate(receiptRoutes, fx.ResultTags(`group:"admin_routes"`)),
			fx.Annotate(planRoutes, fx.ResultTags(`group:"admin_routes"`)),
			newDLQ,
			fx.Annotate(dlqRoutes, fx.ResultTags(`group:"admin_routes"`)),
			fx.Annotate(dlqTriageRoutes, fx.ResultTags(`group:"admin_routes"`)),
			fx.Annotate(dlqSearchRoutes, fx.ResultTags(`group:"admin_routes"`)),
			fx.Annotate(dlqOperationRoutes, fx.ResultTags(`group:"admin_routes"`)),
			newArchive,
			fx.Annotate(archiveRoutes, fx.ResultTags(`group:"admin_routes"`)),
		),
	)
}

// dlqPolicy reads the config at every use, so that a reload applies at
// once; with [[dlq.topic]] blocks, each DLQ topic gets its own.
func dlqPolicy(holder *config.Holder) func() dlq.Policy {
	return func() dlq.Policy {
		c := holder.Get()
		p := topicPolicy(c.DLQTopicPolicy(""))
		if len(c.DLQ.Topics) > 0 {
			p.ForTopic = func(topic string) dlq.Policy { return topicPolicy(c.DLQTopicPolicy(topic)) }
		}
		return p
	}
}

// topicPolicy is the dlq.Policy of one resolved topic policy.
func topicPolicy(t config.DLQTopicPolicy) dlq.Policy {
	r := t.Retry
	return dlq.Policy{
		AutoRetry:        r.Enabled,
		MaxRetries:       r.MaxRetries,
		Backoff:          retry.Policy{Initial: r.InitialDelay.Duration, Multiplier: r.Multiplier, Max: r.MaxDelay.Duration, Jitter: retry.Jitter(r.Jitter)},
		Lease:            r.Lease.Duration,
		AutoPauseReturns: t.AutoPauseReturns,
		AutoPauseWindow:  t.AutoPauseWindow,
		ReplayTargets:    t.ReplayTargets,
	}
}

// dlqParts are the dead-letter manager's pieces; the intake is reloaded on
// SIGHUP when sources change.
type dlqParts struct {
	fx.Out
	Service *dlq.Service
	Bulk    *bulk.Service
	Intake  *intake.Pipeline
}

func newDLQ(lc fx.Lifecycle, holder *config.Holder, log hclog.Logger, reg prometheus.Registerer,
	st store.Store, host *pluginhost.Host, id daemonID, pm *periodic.Metrics) dlqParts {
	metrics := dlq.NewMetrics(reg, st, host, pm)
	policy := dlqPolicy(holder)
	svc := dlq.NewService(st, host, policy, string(id), log, metrics)
	intake := intake.New(st, host, policy, intake.Config{}, log, intake.NewMetrics(reg, pm))
	loop := dlq.NewRetryLoop(svc, func() time.Duration { return holder.Get().Retry.PollInterval.Duration })
	// Bulk operations are polled for and leased like retries.
	ops := bulk.NewService(svc, st, log)
	runner := bulk.NewRunner(ops, func() bulk.Config {
		r := holder.Get().Retry
		return bulk.Config{PollInterval: r.PollInterval.Duration, Lease: r.Lease.Duration, MaxRunning: maxBulkOperations}
	}, pm)
	lc.Append(fx.Hook{OnStop: svc.Stop})
	lc.Append(fx.Hook{OnStart: intake.Start, OnStop: intake.Stop})
	lc.Append(fx.Hook{OnStart: loop.Start, OnStop: loop.Stop})
	lc.Append(fx.Hook{OnStart: runner.Start, OnStop: runner.Stop})
	indexer := searchindex.New(st, log, reg, pm)
	lc.Append(fx.Hook{OnStart: indexer.Start, OnStop: indexer.Stop})
	return dlqParts{Service: svc, Bulk: ops, Intake: intake}
}

func dlqRoutes(svc *dlq.Service, ops *bulk.Service) func(*http.ServeMux) {
	return adminapi.DLQRoutes(svc, ops)
}

func dlqTriageRoutes(svc *dlq.Service) func(*http.ServeMux) {
	return adminapi.DLQTriageRoutes(svc)
}

func dlqOperationRoutes(svc *dlq.Service, ops *bulk.Service) func(*http.ServeMux) {
	return adminapi.DLQOperationRoutes(ops, svc)
}

// maxBulkOperations is how many bulk operations one daemon runs at once;
// more wait (RUNNING) for a free slot here or on another daemon.
const maxBulkOperations = 2

func dlqSearchRoutes(svc *dlq.Service) func(*http.ServeMux) {
	return adminapi.DLQSearchRoutes(svc)
}

func newArchive(lc fx.Lifecycle, holder *config.Holder, log hclog.Logger, reg prometheus.Registerer,
	st store.Store, pm *periodic.Metrics) *archive.Scheduler {
	s := archive.New(st, func() archive.Config {
		a := holder.Get().Archive
		return archive.Config{Enabled: a.Enabled, Interval: a.Interval.Duration, Retention: a.Retention.Duration,
			ArchiveRetention: a.ArchiveRetention.Duration, BatchSize: a.BatchSize}
	}, log, reg, pm)
	lc.Append(fx.Hook{OnStart: s.Start, OnStop: s.Stop})
	return s
}

func archiveRoutes(s *archive.Scheduler) func(*http.ServeMux) {
	return adminapi.ArchiveRoutes(s)
}
