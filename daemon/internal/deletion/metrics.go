package deletion

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	deleted  *prometheus.CounterVec
	failures *prometheus.CounterVec
	jobs     *prometheus.CounterVec
	receipts prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, store JobStore) *metrics {
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
		receipts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lifecycled_deletion_receipts_issued_total",
			Help: "Signed erasure receipts issued by this daemon.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.deleted, m.failures, m.jobs, m.receipts, newJobCollector(store))
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
	for _, s := range []JobStatus{JobCompleted, JobPartial, JobCancelled, JobAwaitingApproval} {
		m.jobs.WithLabelValues(string(s))
	}
}

// jobCollector reads the job gauges from the state store at scrape time
// (every daemon of a store shows the same numbers), at most every five
// seconds.
type jobCollector struct {
	store   JobStore
	mu      sync.Mutex
	at      time.Time
	cached  JobStats
	byState *prometheus.Desc
	overdue *prometheus.Desc
	held    *prometheus.Desc
	holds   *prometheus.Desc
}

func newJobCollector(store JobStore) *jobCollector {
	return &jobCollector{
		store: store,
		byState: prometheus.NewDesc("lifecycled_deletion_jobs", "Tenant deletion jobs in the state store by status.",
			[]string{"status"}, nil),
		overdue: prometheus.NewDesc("lifecycled_deletion_scheduled_overdue_seconds",
			"How long the most overdue SCHEDULED job (not on hold) has been past its not_before; 0 when none.", nil, nil),
		held: prometheus.NewDesc("lifecycled_deletion_jobs_on_hold",
			"Unfinished deletion jobs whose tenant is under a legal hold (they wait).", nil, nil),
		holds: prometheus.NewDesc("lifecycled_tenant_holds", "Active legal holds.", nil, nil),
	}
}

func (c *jobCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.byState
	ch <- c.overdue
	ch <- c.held
	ch <- c.holds
}

func (c *jobCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	if time.Since(c.at) > 5*time.Second {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if st, err := c.store.DeletionJobStats(ctx, time.Now()); err == nil {
			c.cached, c.at = st, time.Now()
		}
		cancel()
	}
	st := c.cached
	c.mu.Unlock()
	for _, s := range JobStatuses {
		ch <- prometheus.MustNewConstMetric(c.byState, prometheus.GaugeValue, float64(st.ByStatus[s]), string(s))
	}
	overdue := 0.0
	if st.OldestOverdue != nil {
		overdue = max(0, time.Since(*st.OldestOverdue).Seconds())
	}
	ch <- prometheus.MustNewConstMetric(c.overdue, prometheus.GaugeValue, overdue)
	ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(st.Held))
	ch <- prometheus.MustNewConstMetric(c.holds, prometheus.GaugeValue, float64(st.Holds))
}
