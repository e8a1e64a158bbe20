// Package metrics exports what the fleet is doing to Prometheus: what is
// live (from the monitor's sweeps), what ended (counted once, by the
// launcher that launched it), how the machinery is doing (launches,
// sweeps, schedule fires, store calls and the capacity they consume).
// docs/metrics.md lists every metric; the names and labels are an
// interface that dashboards and alerts depend on, so they change only
// with a major version.
//
// Labels carry names (of workflows, activities, schedules), states,
// outcomes, launch types, operations, codes and reasons, never an
// execution or activity ID: every run would make new series.
//
// The participants know nothing of Prometheus: they tell observers
// (monitor.Observer, launcher.Observer, the store's dynamodb.Hooks) what
// happened, and this package turns that into metrics. Only the commands
// import it, so the activity wrapper links no metrics library.
package metrics

import (
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes every metric's name.
const Namespace = "whimbrel"

// Label names: the only ones any metric uses.
const (
	LabelWorkflow   = "workflow"
	LabelActivity   = "activity"
	LabelState      = "state"
	LabelOutcome    = "outcome"
	LabelLaunchType = "launch_type"
	LabelPool       = "pool" // reserved for pools' metrics
	LabelSchedule   = "schedule"
	LabelOperation  = "operation"
	LabelCode       = "code"
	LabelReason     = "reason"
)

// Buckets of the histograms, in seconds.
var (
	// runBuckets: how long activities and workflows run, from a second to
	// a day.
	runBuckets = []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400}
	// waitBuckets: launch latency and schedule lag, from milliseconds to
	// an hour.
	waitBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600}
	// callBuckets: one store call or one sweep.
	callBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15, 60}
)

// Metrics holds one process's metrics. A nil *Metrics is valid and
// observes nothing: a command without --metrics-addr has one.
type Metrics struct {
	reg   *prometheus.Registry
	names []string // of Whimbrel's own metrics, as registered

	// What is live, set by each sweep of a monitor.
	activities      *prometheus.GaugeVec
	workflows       *prometheus.GaugeVec
	oldestReady     *prometheus.GaugeVec
	oldestHeartbeat *prometheus.GaugeVec
	sweeps          *prometheus.CounterVec
	sweepDuration   prometheus.Observer
	actions         *prometheus.CounterVec

	// What ended, counted by the launcher that launched it.
	activitiesEnded  *prometheus.CounterVec
	activityDuration *prometheus.HistogramVec
	workflowsEnded   *prometheus.CounterVec
	workflowDuration *prometheus.HistogramVec
	tracked          prometheus.Gauge

	// Launches.
	launches       *prometheus.CounterVec
	launchFailures *prometheus.CounterVec
	launchLatency  *prometheus.HistogramVec

	// Schedules.
	fires *prometheus.CounterVec
	lag   *prometheus.HistogramVec

	// The store.
	storeCalls    *prometheus.CounterVec
	storeDuration *prometheus.HistogramVec
	capacity      *prometheus.CounterVec

	// Notifications (notify.go).
	notify *notifyMetrics
}

// New returns the metrics of one process, with the Go runtime's and the
// process's own (go_*, process_*).
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		m.names = append(m.names, Namespace+"_"+name)
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help}, labels)
		m.reg.MustRegister(g)
		return g
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		m.names = append(m.names, Namespace+"_"+name)
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
		m.reg.MustRegister(c)
		return c
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		m.names = append(m.names, Namespace+"_"+name)
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: name, Help: help, Buckets: buckets}, labels)
		m.reg.MustRegister(h)
		return h
	}
	m.activities = gauge("activities", "Live activities by workflow name and state, as the last sweep of this monitor listed them.", LabelWorkflow, LabelState)
	m.workflows = gauge("workflows", "Live workflows (RUNNING, REQUESTED) by workflow name and state, as the last sweep of this monitor listed them.", LabelWorkflow, LabelState)
	m.oldestReady = gauge("oldest_ready_seconds", "How long the oldest READY activity of each workflow name has waited, at the last sweep.", LabelWorkflow)
	m.oldestHeartbeat = gauge("oldest_heartbeat_seconds", "Age of the oldest last heartbeat among the RUNNING activities of each workflow name, at the last sweep.", LabelWorkflow)
	m.sweeps = counter("monitor_sweeps_total", "Sweeps made by this monitor, by outcome (ok, error).", LabelOutcome)
	m.sweepDuration = histogram("monitor_sweep_duration_seconds", "How long one sweep took.", callBuckets).WithLabelValues()
	m.actions = counter("monitor_actions_total", "What this monitor's conditional writes did, by operation: timed_out (heartbeat timeouts recorded), failed_launch, cancelled, cancelled_running, repaired, readied, cancelled_downstream, settled, failed_start, adopted; undecodable counts items skipped.", LabelOperation)
	m.activitiesEnded = counter("activities_ended_total", "Activity attempts ended, by workflow name, activity name and outcome; each counted once, by the launcher that launched it.", LabelWorkflow, LabelActivity, LabelOutcome)
	m.activityDuration = histogram("activity_duration_seconds", "How long activity attempts ran (start to end), by workflow name, activity name and outcome; observed with activities_ended_total, for attempts that started.", runBuckets, LabelWorkflow, LabelActivity, LabelOutcome)
	m.workflowsEnded = counter("workflows_ended_total", "Workflows ended, by workflow name and outcome; each counted once, by the launcher that launched the attempt that ended last.", LabelWorkflow, LabelOutcome)
	m.workflowDuration = histogram("workflow_duration_seconds", "How long workflows ran (start to end), by workflow name and outcome.", runBuckets, LabelWorkflow, LabelOutcome)
	m.tracked = gauge("launcher_tracked_attempts", "Attempts this launcher launched whose ending (or whose workflow's) it has yet to count.").WithLabelValues()
	m.launches = counter("launches_total", "Activities this launcher started, by workflow name and launch type.", LabelWorkflow, LabelLaunchType)
	m.launchFailures = counter("launch_failures_total", "Launches this launcher recorded as failed, by workflow name, launch type and reason (backend, exited_before_claim, unknown_activity).", LabelWorkflow, LabelLaunchType, LabelReason)
	m.launchLatency = histogram("launch_latency_seconds", "Time from an activity becoming launchable (READY, or a retry's delay ended) to its start by this launcher, by launch type.", waitBuckets, LabelLaunchType)
	m.fires = counter("schedule_fires_total", "Runs this scheduler started for a schedule's fire time, by schedule; a fire time another scheduler started first is not counted here.", LabelSchedule)
	m.lag = histogram("schedule_lag_seconds", "Time from a fire time to the start of its run, by schedule.", waitBuckets, LabelSchedule)
	m.storeCalls = counter("store_calls_total", "Calls to DynamoDB by operation (GetItem, UpdateItem, Query, …) and code (OK, or DynamoDB's error code, or Timeout, Canceled, Unreachable, Error).", LabelOperation, LabelCode)
	m.storeDuration = histogram("store_call_duration_seconds", "How long calls to DynamoDB took, the SDK's retries inside, by operation.", callBuckets, LabelOperation)
	m.capacity = counter("store_capacity_units_total", "Capacity units DynamoDB reports consumed (read and write, table and indexes), by the store's operation (UpdateActivity, Heartbeat, ActivitiesInState, …).", LabelOperation)
	m.notify = &notifyMetrics{
		written:     counter("notifications_total", "Notifications written, by workflow name and outcome (the event: failed, timed_out, …); each counted once across the fleet, by the deliverer that first took it.", LabelWorkflow, LabelOutcome),
		deliveries:  counter("notification_deliveries_total", "Tries of notification deliveries by workflow name, how they ended (delivered, failed, undeliverable) and code (the receiver's HTTP status, error, or none).", LabelWorkflow, LabelOutcome, LabelCode),
		undelivered: gauge("notifications_undelivered", "Notifications this deliverer gave up (UNDELIVERABLE after 24 h of tries) since it started, by workflow name; each counted by one deliverer.", LabelWorkflow),
		took:        histogram("notification_delivery_seconds", "How long one try of a delivery took, until the receiver answered or was cut off.", deliveryBuckets).WithLabelValues(),
	}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics in Prometheus's text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Names are the names of Whimbrel's own metrics (docs/metrics.md).
func (m *Metrics) Names() []string { return append([]string(nil), m.names...) }

// Registry is where the metrics are registered: tests gather from it.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// maxLabel bounds a label value: names come from definitions and from
// other clients' items.
const maxLabel = 128

// label makes a name from an item a label value: valid UTF-8 (the
// exposition refuses anything else), bounded, and never empty.
func label(v string) string {
	v = strings.ToValidUTF8(v, "\uFFFD")
	if len(v) > maxLabel {
		cut := maxLabel
		for cut > 0 && !utf8.RuneStart(v[cut]) {
			cut--
		}
		v = v[:cut]
	}
	if v == "" {
		return "unknown"
	}
	return v
}
