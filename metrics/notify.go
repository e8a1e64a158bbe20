package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/whimbrel/whimbrel/notify"
)

// notifyMetrics are a deliverer's (package notify).
type notifyMetrics struct {
	written     *prometheus.CounterVec
	deliveries  *prometheus.CounterVec
	undelivered *prometheus.GaugeVec
	took        prometheus.Observer
}

// deliveryBuckets are for one try of a delivery: a receiver answers in
// milliseconds, or is cut off after its timeout (10 s by default).
var deliveryBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// Notify is the observer of a deliverer; nil when m is.
func (m *Metrics) Notify() notify.Observer {
	if m == nil {
		return nil
	}
	return deliveries{m.notify}
}

// Notify is the observer of a deliverer; a no-op on a nil s.
func (s *Server) Notify() notify.Observer { return s.Metrics().Notify() }

type deliveries struct{ m *notifyMetrics }

// Written counts a delivery taken for the first time: once across the
// fleet, by the deliverer whose conditional write took it.
func (o deliveries) Written(workflow, event string) {
	o.m.written.WithLabelValues(label(workflow), event).Inc()
}

// Tried counts one try by how it ended; a delivery given up is counted
// in the undelivered gauge by the deliverer whose write gave it up.
func (o deliveries) Tried(workflow, event, outcome, code string, took time.Duration) {
	if code == "" {
		code = "none"
	}
	o.m.deliveries.WithLabelValues(label(workflow), outcome, label(code)).Inc()
	if took > 0 {
		o.m.took.Observe(took.Seconds())
	}
	if outcome == "undeliverable" {
		o.m.undelivered.WithLabelValues(label(workflow)).Inc()
	}
}
