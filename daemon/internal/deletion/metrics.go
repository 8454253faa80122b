package deletion

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	deleted  *prometheus.CounterVec
	failures *prometheus.CounterVec
	jobs     *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifecycled_deletion_items_deleted_total",
			Help: "Items (rows, keys, ...) deleted by tenant deletion jobs, by deleter.",
		}, []string{"deleter"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifecycled_deletion_failures_total",
			Help: "Deleter attempts that failed, by deleter.",
		}, []string{"deleter"}),
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifecycled_deletion_attempts_total",
			Help: "Finished deletion job attempts by resulting job status.",
		}, []string{"status"}),
	}
	if reg != nil {
		reg.MustRegister(m.deleted, m.failures, m.jobs)
	}
	return m
}

// known makes the series of configured deleters exist at 0 before their
// first increment (and after a reload adds one), so that rate() and alert
// rules see them.
func (m *metrics) known(deleters []string) {
	for _, d := range deleters {
		m.deleted.WithLabelValues(d)
		m.failures.WithLabelValues(d)
	}
	for _, s := range []JobStatus{JobCompleted, JobPartial} {
		m.jobs.WithLabelValues(string(s))
	}
}
