package dlq

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// pausedCollector exports lifecycled_dlq_topic_paused: 1 per paused DLQ
// topic, read from the store at scrape time (cached briefly), so it is
// right on every daemon sharing the store.
type pausedCollector struct {
	store  PauseStore
	mu     sync.Mutex
	at     time.Time
	cached []TopicPause
}

var pausedDesc = prometheus.NewDesc("lifecycled_dlq_topic_paused",
	"1 for each DLQ topic whose automatic retries are paused; reason is auto (its replays kept coming back) or manual.",
	[]string{"topic", "reason"}, nil)

func (c *pausedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- pausedDesc }

func (c *pausedCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	if time.Since(c.at) > 5*time.Second {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if ps, err := c.store.DLQTopicPauses(ctx); err == nil {
			c.cached, c.at = ps, time.Now()
		}
		cancel()
	}
	ps := c.cached
	c.mu.Unlock()
	for _, p := range ps {
		reason := "manual"
		if p.Auto {
			reason = "auto"
		}
		ch <- prometheus.MustNewConstMetric(pausedDesc, prometheus.GaugeValue, 1, p.Topic, reason)
	}
}
