package pluginhost

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	up       *prometheus.GaugeVec
	storeUp  *prometheus.GaugeVec
	restarts *prometheus.CounterVec
	rpc      *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lifecycled_plugin_up",
			Help: "1 when the plugin process is running and configured, else 0.",
		}, []string{"plugin", "kind"}),
		storeUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lifecycled_plugin_store_up",
			Help: "1 when the plugin's last probe of its store (the Health call) succeeded, 0 when it failed; no sample while unknown (not probed, plugin not running, or a plugin without Health).",
		}, []string{"plugin", "kind"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifecycled_plugin_restarts_total",
			Help: "Times the supervisor started a plugin again after a crash or failed start.",
		}, []string{"plugin"}),
		rpc: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lifecycled_plugin_rpc_duration_seconds",
			Help:    "Latency of calls to plugins by method and outcome.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .1, .5, 1, 5, 30, 300},
		}, []string{"plugin", "method", "outcome"}),
	}
	if reg != nil {
		reg.MustRegister(m.up, m.storeUp, m.restarts, m.rpc)
	}
	return m
}
