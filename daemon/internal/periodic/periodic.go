// Package periodic records when the daemon's periodic jobs (intake, retry
// loop, deletion runner, retention) last succeeded and how often they run,
// for the "job has not succeeded within three intervals" alert.
package periodic

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are shared by every periodic job, labelled by job name.
type Metrics struct {
	last     *prometheus.GaugeVec
	interval *prometheus.GaugeVec
}

// New registers the gauges with reg (nil: not registered, for tests).
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		last: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lifecycled_periodic_last_success_timestamp_seconds",
			Help: "When a periodic job last completed a pass without error (Unix time).",
		}, []string{"job"}),
		interval: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lifecycled_periodic_interval_seconds",
			Help: "How often a periodic job runs.",
		}, []string{"job"}),
	}
	if reg != nil {
		reg.MustRegister(m.last, m.interval)
	}
	return m
}

// Success records a successful pass of job now, and its interval.
func (m *Metrics) Success(job string, interval time.Duration) {
	if m == nil {
		return
	}
	m.last.WithLabelValues(job).SetToCurrentTime()
	m.interval.WithLabelValues(job).Set(interval.Seconds())
}

// Interval records how often job runs (before its first success).
func (m *Metrics) Interval(job string, interval time.Duration) {
	if m == nil {
		return
	}
	m.interval.WithLabelValues(job).Set(interval.Seconds())
}
