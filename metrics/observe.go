package metrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/whimbrel/whimbrel/monitor"
	"github.com/whimbrel/whimbrel/schedule"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// Monitor is the observer of a monitor's sweeps; nil when m is.
func (m *Metrics) Monitor() monitor.Observer {
	if m == nil {
		return nil
	}
	return sweeps{m}
}

type sweeps struct{ m *Metrics }

// Swept sets the live gauges from what the sweep listed and counts what
// it did. The gauges of a state whose listing failed keep their last
// values: unknown is not zero.
func (o sweeps) Swept(s monitor.Seen) {
	m := o.m
	outcome := "ok"
	if s.Err != nil {
		outcome = "error"
	}
	m.sweeps.WithLabelValues(outcome).Inc()
	m.sweepDuration.Observe(s.Took.Seconds())
	for _, st := range s.ActivityStates {
		m.activities.DeletePartialMatch(prometheus.Labels{LabelState: string(st)})
	}
	for k, n := range s.Activities {
		m.activities.WithLabelValues(label(k.Workflow), k.State).Set(float64(n))
	}
	for _, st := range s.WorkflowStates {
		m.workflows.DeletePartialMatch(prometheus.Labels{LabelState: string(st)})
	}
	for k, n := range s.Workflows {
		m.workflows.WithLabelValues(label(k.Workflow), k.State).Set(float64(n))
	}
	if listed(s, "READY") {
		m.oldestReady.Reset()
		for name, d := range s.OldestReady {
			m.oldestReady.WithLabelValues(label(name)).Set(d.Seconds())
		}
	}
	if listed(s, "RUNNING") {
		m.oldestHeartbeat.Reset()
		for name, d := range s.OldestHeartbeat {
			m.oldestHeartbeat.WithLabelValues(label(name)).Set(d.Seconds())
		}
	}
	r := s.Report
	for op, n := range map[string]int{
		"timed_out": r.TimedOut, "failed_launch": r.FailedLaunches, "cancelled": r.Cancelled,
		"cancelled_running": r.CancelledRunning, "repaired": r.Repaired, "readied": r.Readied,
		"cancelled_downstream": r.CancelledDown, "settled": r.Settled, "failed_start": r.FailedStarts,
		"adopted": r.Adopted, "undecodable": r.Undecodable,
	} {
		// Every operation is exported from the first sweep on, at 0, so
		// that rate() sees its first increase.
		m.actions.WithLabelValues(op).Add(float64(n))
	}
}

func listed(s monitor.Seen, st string) bool {
	for _, l := range s.ActivityStates {
		if string(l) == st {
			return true
		}
	}
	return false
}

// Ticked counts the runs one tick of a scheduler started, with their lag;
// a no-op on a nil m.
func (m *Metrics) Ticked(r schedule.Report) {
	if m == nil {
		return
	}
	for _, f := range r.Fired {
		name := label(f.Schedule)
		m.fires.WithLabelValues(name).Inc()
		m.lag.WithLabelValues(name).Observe(max(f.At.Sub(f.Fire).Seconds(), 0))
	}
}

// StoreHooks are the hooks that count a DynamoDB store's calls, their
// latency and the capacity they consume; none on a nil m.
func (m *Metrics) StoreHooks() dynamodb.Hooks {
	if m == nil {
		return dynamodb.Hooks{}
	}
	return dynamodb.Hooks{
		Observe: func(c dynamodb.Call) {
			op := label(c.Op)
			m.storeCalls.WithLabelValues(op, label(code(c.Code))).Inc()
			m.storeDuration.WithLabelValues(op).Observe(c.Took.Seconds())
		},
		Capacity: func(c dynamodb.Capacity) {
			m.capacity.WithLabelValues(label(c.Op)).Add(c.Total)
		},
	}
}

// code keeps an error code a code: DynamoDB's are words like
// ThrottlingException; anything longer or stranger is "Error".
func code(c string) string {
	if len(c) > 64 || strings.ContainsFunc(c, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '#')
	}) {
		return "Error"
	}
	return c
}
