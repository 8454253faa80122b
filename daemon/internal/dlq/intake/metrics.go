package intake

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/periodic"
)

// job is the intake's name in the periodic jobs' metrics: it "runs" once
// per fetch wait.
const job = "dlq_intake"

// Metrics are the intake's Prometheus metrics.
type Metrics struct {
	ingested   *prometheus.CounterVec
	duplicates *prometheus.CounterVec
	returned   *prometheus.CounterVec
	dead       prometheus.Counter
	autoPauses prometheus.Counter
	// targetRefused counts dead letters stored whose header named a topic
	// outside their DLQ topic's replay targets (a redelivery counts again).
	targetRefused *prometheus.CounterVec
	periodic      *periodic.Metrics
}

// NewMetrics registers the metrics with reg (none when nil).
func NewMetrics(reg prometheus.Registerer, p *periodic.Metrics) *Metrics {
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
		dead: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lifecycled_dlq_dead_by_return_total", Help: "Messages declared DEAD because they came back after their last retry.",
		}),
		autoPauses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lifecycled_dlq_auto_pauses_total", Help: "DLQ topics paused automatically because their replays kept coming back.",
		}),
		targetRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifecycled_dlq_replay_target_refused_total",
			Help: "Dead letters stored whose header named an original topic outside their DLQ topic's replay targets: not retried until an operator replays them to a topic.",
		}, []string{"topic"}),
		periodic: p,
	}
	if reg != nil {
		reg.MustRegister(m.ingested, m.duplicates, m.returned, m.dead, m.autoPauses, m.targetRefused)
	}
	return m
}

// stored counts a batch the store took from source.
func (m *Metrics) stored(source string, res dlq.IngestResult, targetRefused []string) {
	m.ingested.WithLabelValues(source).Add(float64(res.Inserted))
	m.duplicates.WithLabelValues(source).Add(float64(res.Duplicates))
	m.returned.WithLabelValues(source).Add(float64(res.Feedback))
	m.dead.Add(float64(res.Dead))
	for _, topic := range targetRefused {
		m.targetRefused.WithLabelValues(topic).Inc()
	}
}

// passed records a successful pass of the intake, which is due again
// within interval.
func (m *Metrics) passed(interval time.Duration) {
	if m.periodic != nil {
		m.periodic.Success(job, interval)
	}
}
