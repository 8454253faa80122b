package dlq

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lifecycled/lifecycled/daemon/internal/periodic"
)

type job string

const (
	jobRetry job = "dlq_retry"
	// jobOperations takes and runs bulk operations.
	jobOperations job = "dlq_operations"
)

// Metrics are the dead-letter manager's Prometheus metrics (the intake has
// its own: intake.Metrics). Depth and age
// come from the store at scrape time (cached briefly), so they are right on
// every daemon sharing a store.
type Metrics struct {
	retries  *prometheus.CounterVec
	replays  *prometheus.CounterVec
	periodic *periodic.Metrics
	depth    *depthCollector
}

// NewMetrics registers the metrics; store feeds the depth gauges, and
// sources says which sources are configured.
func NewMetrics(reg prometheus.Registerer, store Store, sources Sources, p *periodic.Metrics) *Metrics {
	m := &Metrics{
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifecycled_dlq_retries_total", Help: "Republish attempts by source, outcome (resolved, failed, dead, unavailable) and trigger (manual, retry_all, auto).",
		}, []string{"source", "outcome", "trigger"}),
		replays: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifecycled_dlq_replays_total", Help: "Edit-and-replay sends by source and outcome (resolved, failed, unavailable).",
		}, []string{"source", "outcome"}),
		periodic: p,
		depth:    &depthCollector{store: store, sources: sources},
	}
	m.depth.init()
	if reg != nil {
		reg.MustRegister(m.retries, m.replays, m.depth, &pausedCollector{store: store})
	}
	if sources != nil {
		for _, src := range sources.SourceNames() {
			for _, o := range outcomeNames {
				for _, t := range []Trigger{TriggerManual, TriggerRetryAll, TriggerAuto} {
					m.retries.WithLabelValues(src, o, string(t))
				}
			}
		}
	}
	return m
}

type depthCollector struct {
	store        Store
	sources      Sources
	mu           sync.Mutex
	at           time.Time
	cached       []TopicSummary
	orphans      map[string]int64 // PENDING messages by unconfigured source
	depth        *prometheus.Desc
	age          *prometheus.Desc
	unconfigured *prometheus.Desc
}

func (d *depthCollector) init() {
	d.depth = prometheus.NewDesc("lifecycled_dlq_messages", "Dead letters by DLQ topic and status.", []string{"topic", "status"}, nil)
	d.age = prometheus.NewDesc("lifecycled_dlq_oldest_pending_age_seconds", "Age of the oldest PENDING dead letter per DLQ topic (0 when none).", []string{"topic"}, nil)
	d.unconfigured = prometheus.NewDesc("lifecycled_dlq_unconfigured_source_messages",
		"PENDING dead letters of a source that is not configured (renamed or removed): they are not retried.", []string{"source"}, nil)
}

func (d *depthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- d.depth
	ch <- d.age
	ch <- d.unconfigured
}

func (d *depthCollector) Collect(ch chan<- prometheus.Metric) {
	d.mu.Lock()
	if time.Since(d.at) > 5*time.Second {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		topics, err := d.store.DLQTopics(ctx)
		var pending []SourcePending
		if err == nil && d.sources != nil {
			pending, err = d.store.PendingBySourceDLQ(ctx, d.sources.SourceNames())
		}
		if err == nil {
			d.cached, d.at, d.orphans = topics, time.Now(), map[string]int64{}
			for _, p := range pending {
				d.orphans[p.Source] += p.Pending
			}
		}
		cancel()
	}
	topics, orphans := d.cached, d.orphans
	d.mu.Unlock()
	for source, n := range orphans {
		ch <- prometheus.MustNewConstMetric(d.unconfigured, prometheus.GaugeValue, float64(n), source)
	}
	for _, t := range topics {
		for _, s := range Statuses {
			ch <- prometheus.MustNewConstMetric(d.depth, prometheus.GaugeValue, float64(t.Counts[s]), t.Topic, string(s))
		}
		age := 0.0
		if t.OldestPendingAt != nil {
			age = time.Since(*t.OldestPendingAt).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(d.age, prometheus.GaugeValue, age, t.Topic)
	}
}
