//go:build linux

package metrics

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/monitor"
	"github.com/whimbrel/whimbrel/schedule"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// idLike matches an execution or activity ID: NAME::UUID.
var idLike = regexp.MustCompile(`::[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-`)

// feed tells every observer of m something about hostile names and IDs,
// so that every metric family has a series.
func feed(t *testing.T, m *Metrics) {
	t.Helper()
	wf := state.NewWorkflowExecID("<script>x\x1b[31m")
	act := state.ActivityExecIDFor(wf, "fetch\xff")
	m.Monitor().Swept(monitor.Seen{
		Took: time.Second, ActivityStates: []state.ActivityState{state.Ready, state.Running}, WorkflowStates: []state.WorkflowState{state.WorkflowRunning},
		Activities:      map[monitor.NameState]int{{Workflow: monitor.NameOf(wf), State: "READY"}: 2, {Workflow: monitor.NameOf(act), State: "RUNNING"}: 1},
		Workflows:       map[monitor.NameState]int{{Workflow: monitor.NameOf(wf), State: "RUNNING"}: 1},
		OldestReady:     map[string]time.Duration{monitor.NameOf(wf): time.Minute},
		OldestHeartbeat: map[string]time.Duration{monitor.NameOf(wf): time.Second},
		Report:          monitor.Report{TimedOut: 1},
	})
	e := newEndings(m, nil, nil, time.Hour)
	a := &state.ActivityExec{ActivityKey: state.ActivityKey{ActivityExecID: act, WorkflowExecID: wf}, ActivityName: "fetch\xff",
		State: state.Failed, StartTime: time.Now().Add(-time.Minute), EndTime: time.Now()}
	e.Launched(a, "local", time.Second)
	e.LaunchFailed(a.ActivityKey, "docker", launcher.FailedBackend)
	e.activityEnded(a)
	m.workflowsEnded.WithLabelValues(label(monitor.NameOf(wf)), "failed").Inc()
	m.workflowDuration.WithLabelValues(label(monitor.NameOf(wf)), "failed").Observe(60)
	m.Ticked(schedule.Report{Fired: []schedule.Fired{{Schedule: "nightly", Fire: time.Now().Add(-time.Second), At: time.Now()}}})
	h := m.StoreHooks()
	h.Observe(dynamodb.Call{Op: "UpdateItem", Took: time.Millisecond, Code: "ConditionalCheckFailedException"})
	h.Observe(dynamodb.Call{Op: "GetItem", Took: time.Millisecond, Code: "OK"})
	h.Capacity(dynamodb.Capacity{Op: "UpdateActivity", Total: 2})
	n := m.Notify()
	n.Written(monitor.NameOf(wf), "failed")
	n.Tried(monitor.NameOf(wf), "failed", "failed", "500", time.Second)
	n.Tried(monitor.NameOf(wf), "failed", "undeliverable", "", 0)
}

// TestNoLabelIsAnID: whatever names and IDs the observers are told, no
// label value is an execution or activity ID, every value is valid
// UTF-8, and every Whimbrel metric has a series to show.
func TestNoLabelIsAnID(t *testing.T) {
	m := New()
	feed(t, m)
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	seen := map[string]bool{}
	for _, f := range fams {
		seen[f.GetName()] = true
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if idLike.MatchString(l.GetValue()) {
					t.Errorf("%s{%s=%q}: a label value is an ID", f.GetName(), l.GetName(), l.GetValue())
				}
				if strings.HasPrefix(f.GetName(), Namespace+"_") && !slices.Contains(allowed, l.GetName()) {
					t.Errorf("%s has label %q, not one of %v", f.GetName(), l.GetName(), allowed)
				}
			}
		}
	}
	for _, n := range m.Names() {
		if !seen[n] {
			t.Errorf("metric %s has no series after feeding every observer", n)
		}
	}
	if !idLike.MatchString(state.NewWorkflowExecID("x")) {
		t.Fatal("idLike does not match an ID: the test cannot fail")
	}
}

var allowed = []string{LabelWorkflow, LabelActivity, LabelState, LabelOutcome, LabelLaunchType, LabelPool, LabelSchedule, LabelOperation, LabelCode, LabelReason}

var metricName = regexp.MustCompile(`whimbrel_[a-z_]+`)

// TestDocsListEveryMetric: docs/metrics.md's table has a row for every
// metric, and names none that does not exist.
func TestDocsListEveryMetric(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc, _, _ := strings.Cut(string(b), "## Names to come")
	rows := map[string]bool{}
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "| `whimbrel_") {
			name := strings.Trim(strings.Split(line, "|")[1], " `")
			rows[name] = true
		}
	}
	names := New().Names()
	for _, n := range names {
		if !rows[n] {
			t.Errorf("docs/metrics.md has no row for %s", n)
		}
	}
	for _, n := range metricName.FindAllString(doc, -1) {
		if !slices.Contains(names, strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")) {
			t.Errorf("docs/metrics.md names %s, which is not a metric", n)
		}
	}
}

// TestDashboard: examples/grafana/whimbrel.json parses, and its queries
// name only metrics that exist.
func TestDashboard(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "examples", "grafana", "whimbrel.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("examples/grafana/whimbrel.json: %v", err)
	}
	m := New()
	feed(t, m)
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	exist := map[string]bool{}
	for _, f := range fams {
		exist[f.GetName()] = true
		if f.GetType().String() == "HISTOGRAM" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				exist[f.GetName()+s] = true
			}
		}
	}
	n := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, name := range metricName.FindAllString(tg.Expr, -1) {
				n++
				if !exist[name] {
					t.Errorf("panel %q queries %s, which no registry holds", p.Title, name)
				}
			}
		}
	}
	if n < 10 {
		t.Errorf("the dashboard queries %d metrics: is it read right?", n)
	}
}
