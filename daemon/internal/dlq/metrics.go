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
	jobIntake job = "dlq_intake"
	jobRetry  job = "dlq_retry"
	// jobOperations takes and runs bulk operations.
	jobOperations job = "dlq_operations"
)

// Metrics are the dead-letter manager's Prometheus metrics. Depth and age
// come from the store at scrape time (cached briefly), so they are right on
// every daemon sharing a store.
type Metrics struct {
	ingested   *prometheus.CounterVec
	duplicates *prometheus.CounterVec
	returned   *prometheus.CounterVec
	retries    *prometheus.CounterVec
	dead       prometheus.Counter
	autoPauses prometheus.Counter
	replays    *prometheus.CounterVec
	// targetRefused counts dead letters stored whose header named a topic
	// outside their DLQ topic's replay targets (a redelivery counts again).
	targetRefused *prometheus.CounterVec
	periodic      *periodic.Metrics
	depth         *depthCollector
}

// NewMetrics registers the metrics; store feeds the depth gauges, and
// sources says which sources are configured.
func NewMetrics(reg prometheus.Registerer, store Store, sources Sources, p *periodic.Metrics) *Metrics {
	m := &Metrics{
		ingested: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifecycled_dlq_ingested_total", Help: "Dead letters taken in and stored (new records).",
		}, []string{"source"}),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifecycled_dlq_duplicates_total", Help: "Dead letters delivered again by their source and not stored twice.",
		}, []string{"source"}),
		returned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifecycled_dlq_returned_total", Help: "Replayed messages that failed again and came back (x-dlq-id).",
		}, []string{"source"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifecycled_dlq_retries_total", Help: "Republish attempts by outcome (resolved, failed, dead, unavailable) and trigger (manual, retry_all, auto).",
		}, []string{"outcome", "trigger"}),
		dead: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lifecycled_dlq_dead_by_return_total", Help: "Messages declared DEAD because they came back after their last retry.",
		}),
		autoPauses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lifecycled_dlq_auto_pauses_total", Help: "DLQ topics paused automatically because their replays kept coming back.",
		}),
		replays: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifecycled_dlq_replays_total", Help: "Edit-and-replay sends by outcome (resolved, failed, unavailable).",
		}, []string{"outcome"}),
		targetRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifecycled_dlq_replay_target_refused_total",
			Help: "Dead letters stored whose header named an original topic outside their DLQ topic's replay targets: not retried until an operator replays them to a topic.",
		}, []string{"topic"}),
		periodic: p,
		depth:    &depthCollector{store: store, sources: sources},
	}
	m.depth.init()
	if reg != nil {
		reg.MustRegister(m.ingested, m.duplicates, m.returned, m.retries, m.dead, m.autoPauses, m.replays, m.targetRefused, m.depth, &pausedCollector{store: store})
	}
	for _, o := range outcomeNames {
		for _, t := range []Trigger{TriggerManual, TriggerRetryAll, TriggerAuto} {
			m.retries.WithLabelValues(o, string(t))
		}
	}
	return m
}

// markSuccess records a successful pass; the intake "runs" once per fetch wait.
func (m *Metrics) markSuccess(j job, interval time.Duration) { m.periodic.Success(string(j), interval) }

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
