// Package definition is the language a workflow is written in: the
// definition's fields, read from YAML (or JSON) and checked with every
// problem named at its line and a suggestion for a misspelt name; the
// parameters and their types; the templates that hand an activity its
// parameters and its upstreams' outputs, and their filters; the warnings
// for a value pasted raw into a shell script; and the stored form kept
// with every execution, read one activity at a time. It decides nothing
// about an execution: package workflow makes the moves.
package definition

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Workflow is the definition of a workflow, as its author writes it in
// YAML (or JSON):
//
//	name: nightly-etl
//	defaults:
//	  heartbeat_interval: 15s
//	activities:
//	  extract:
//	    command: ["sh", "-c", "echo extracting"]
//	  transform:
//	    depends_on: [extract]
//	    command: ["sh", "-c", "echo transforming"]
type Workflow struct {
	// Name names the workflow in every item of its executions.
	Name string `yaml:"name" json:"name"`
	// Description says what the workflow is for, to a reader.
	Description string `yaml:"description,omitempty" json:"description,omitempty"`
	// Retention is how long an execution's items are kept once it settled
	// (DynamoDB's TTL deletes them then); zero keeps them.
	Retention Duration `yaml:"retention,omitempty" json:"retention,omitempty"`
	// Defaults apply to every activity that does not set its own.
	Defaults Settings `yaml:"defaults,omitempty" json:"defaults,omitempty"`
	// Activities are the workflow's steps, by name.
	Activities map[string]*Activity `yaml:"activities" json:"activities"`
	// Params declares the execution's parameters (see Param).
	Params map[string]*Param `yaml:"params,omitempty" json:"params,omitempty"`
	// Finally are the activities that run once the workflow's outcome is
	// known, however it ended (see docs/control-flow.md).
	Finally map[string]*Activity `yaml:"finally,omitempty" json:"finally,omitempty"`
	// Notify says whom to tell of an execution's ending (see Notify), and
	// Deadline when a run not settled that long after its start is
	// deadline_missed (0: never).
	Notify   []Notify `yaml:"notify,omitempty" json:"notify,omitempty"`
	Deadline Duration `yaml:"deadline,omitempty" json:"deadline,omitempty"`
	// Outputs, for a workflow run as a child, are what its parent
	// activity records as its output: names to templates over the
	// outputs of its activities (docs/sub-workflows.md).
	Outputs map[string]string `yaml:"outputs,omitempty" json:"outputs,omitempty"`
	// Concurrency bounds the executions running at once (see Concurrency).
	Concurrency *Concurrency `yaml:"concurrency,omitempty" json:"concurrency,omitempty"`

	warnings []string // found when it was read (see Warnings)
}

// Warnings are what the definition does that it may but should not (a
// value pasted raw into a shell script), each with its line when it was
// read from YAML and what to write instead. The definition runs as it
// is; a command that reads one (start, run, schedule set, register)
// prints them.
func (d *Workflow) Warnings() []string { return d.warnings }

// Activity is one step of a workflow.
type Activity struct {
	// Description says what the activity does, to a reader.
	Description string `yaml:"description,omitempty" json:"description,omitempty"`
	// Command is the argv the wrapper runs, templates resolved.
	Command []string `yaml:"command,omitempty" json:"command,omitempty"`
	// DependsOn names the activities that must complete before it runs.
	DependsOn []string `yaml:"depends_on,omitempty" json:"depends_on,omitempty"`
	// When is an expression that must hold for the activity to run; when
	// it does not, the activity is skipped (see docs/control-flow.md).
	When string `yaml:"when,omitempty" json:"when,omitempty"`
	// TriggerRule says which endings of its upstreams let it run
	// (all_success when empty; see TriggerRules).
	TriggerRule string `yaml:"trigger_rule,omitempty" json:"trigger_rule,omitempty"`
	// Workflow, instead of a command, runs another workflow as a child,
	// with Params templated from this one's data (see ChildWorkflow).
	Workflow *ChildWorkflow    `yaml:"workflow,omitempty" json:"workflow,omitempty"`
	Params   map[string]string `yaml:"params,omitempty" json:"params,omitempty"`
	// ForEach makes it a map: it runs once per element of a list, each
	// run an item of its own (see ForEach, docs/for-each.md); MaxItems
	// caps the list, MaxRunning the elements queued or running at once,
	// and ToleratedFailures the elements that may fail with the map still
	// completing.
	ForEach           *ForEach  `yaml:"for_each,omitempty" json:"for_each,omitempty"`
	MaxItems          int       `yaml:"max_items,omitempty" json:"max_items,omitempty"`
	MaxRunning        int       `yaml:"max_running,omitempty" json:"max_running,omitempty"`
	ToleratedFailures Tolerance `yaml:"tolerated_failures,omitempty" json:"tolerated_failures,omitempty"`
	// Settings are its own; Workflow.Effective fills in the defaults.
	Settings `yaml:",inline" json:",inline"`
}

// Settings apply to an activity; those under defaults apply to every
// activity that does not set its own.
type Settings struct {
	// Env is added to the command's environment, templates resolved.
	Env map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	// HeartbeatInterval and HeartbeatTimeout turn heartbeats on: the
	// wrapper beats every interval, and the monitor times out a claim not
	// renewed within the timeout.
	HeartbeatInterval Duration `yaml:"heartbeat_interval,omitempty" json:"heartbeat_interval,omitempty"`
	HeartbeatTimeout  Duration `yaml:"heartbeat_timeout,omitempty" json:"heartbeat_timeout,omitempty"`
	// Timeout caps the command's run time (whimbrel-run --timeout).
	Timeout Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	// QueuedTimeout is how long the activity may wait between its launch and
	// its start before the monitor fails it (default 10 minutes).
	QueuedTimeout Duration `yaml:"queued_timeout,omitempty" json:"queued_timeout,omitempty"`
	// KillGrace is how long a stopped command has between its stop
	// signal and SIGKILL.
	KillGrace Duration `yaml:"kill_grace,omitempty" json:"kill_grace,omitempty"`
	// Launch says how the launcher starts the activity (nil: local).
	Launch *Launch `yaml:"launch,omitempty" json:"launch,omitempty"`
	// Retry runs the activity again when it fails or times out (see
	// Retry); an activity's own replaces the defaults' as a whole.
	Retry *Retry `yaml:"retry,omitempty" json:"retry,omitempty"`
	// Pool names the pool whose slots the activity holds while it runs,
	// and PoolSlots how many (default 1); see pool.go.
	Pool      string `yaml:"pool,omitempty" json:"pool,omitempty"`
	PoolSlots int    `yaml:"pool_slots,omitempty" json:"pool_slots,omitempty"`
}

// Launch says how an activity is started.
type Launch struct {
	// Type is local (a child process of the launcher, the default),
	// docker, ecs or kubernetes.
	Type string `yaml:"type,omitempty" json:"type,omitempty"`

	// Image is the container image (docker); its entrypoint is whimbrel-run.
	Image string `yaml:"image,omitempty" json:"image,omitempty"`
	// DockerArgs are extra arguments to docker run, before the image.
	DockerArgs []string `yaml:"docker_args,omitempty" json:"docker_args,omitempty"`

	// ECS: the task to run.
	Cluster          string   `yaml:"cluster,omitempty" json:"cluster,omitempty"`
	TaskDefinition   string   `yaml:"task_definition,omitempty" json:"task_definition,omitempty"`
	Container        string   `yaml:"container,omitempty" json:"container,omitempty"`
	LaunchType       string   `yaml:"launch_type,omitempty" json:"launch_type,omitempty"`
	PlatformVersion  string   `yaml:"platform_version,omitempty" json:"platform_version,omitempty"`
	Subnets          []string `yaml:"subnets,omitempty" json:"subnets,omitempty"`
	SecurityGroups   []string `yaml:"security_groups,omitempty" json:"security_groups,omitempty"`
	AssignPublicIP   bool     `yaml:"assign_public_ip,omitempty" json:"assign_public_ip,omitempty"`
	CapacityProvider string   `yaml:"capacity_provider,omitempty" json:"capacity_provider,omitempty"`

	// Kubernetes: the Job to create (see Kubernetes; Image is the
	// container's image).
	Kubernetes `yaml:",inline" json:",inline"`

	// RetryFor is how long the launcher keeps trying a launch that fails
	// for a reason that may pass (throttling, an unreachable endpoint, ECS
	// short of capacity) before it fails the activity; zero: the
	// launcher's default.
	RetryFor Duration `yaml:"retry_for,omitempty" json:"retry_for,omitempty"`
}

// The launch types.
const (
	LaunchLocal  = "local"
	LaunchDocker = "docker"
	LaunchECS    = "ecs"
	// LaunchKubernetes runs the activity as a Kubernetes Job.
	LaunchKubernetes = "kubernetes"
)

// DefaultQueuedTimeout is how long a launched activity may take to start
// (Airflow's task_queued_timeout).
const DefaultQueuedTimeout = 10 * time.Minute

// Duration is a time.Duration written as "90s", "15m", "1h30m" or "30d".
type Duration time.Duration

// ParseDuration reads what time.ParseDuration reads, and whole or
// fractional days ("30d").
func ParseDuration(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		if err != nil || math.IsNaN(n) || math.IsInf(n, 0) || math.Abs(n) > 100*365 || strings.ContainsAny(days, "xXpP_") {
			return 0, fmt.Errorf("%q is not a number of days", s)
		}
		return time.Duration(n * 24 * float64(time.Hour)), nil
	}
	return time.ParseDuration(s)
}

// UnmarshalYAML reads a duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil || n.Kind != yaml.ScalarNode {
		return fmt.Errorf("want a duration such as 30s, 15m or 1h")
	}
	v, err := ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration: write it as 30s, 15m, 1h or 7d", s)
	}
	if v < 0 {
		return fmt.Errorf("%q is negative", s)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration as a string, so the stored definition
// reads back as written.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads what MarshalJSON writes.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := ParseDuration(s)
	*d = Duration(v)
	return err
}

// Effective returns the activity's settings with the defaults filled in.
func (d *Workflow) Effective(name string) Settings {
	a := d.Lookup(name)
	s := a.Settings
	def := d.Defaults
	if s.HeartbeatInterval == 0 {
		s.HeartbeatInterval = def.HeartbeatInterval
	}
	if s.HeartbeatTimeout == 0 {
		s.HeartbeatTimeout = def.HeartbeatTimeout
	}
	if s.Timeout == 0 {
		s.Timeout = def.Timeout
	}
	if s.QueuedTimeout == 0 {
		s.QueuedTimeout = def.QueuedTimeout // still 0: the monitor's setting applies
	}
	if s.KillGrace == 0 {
		s.KillGrace = def.KillGrace
	}
	if s.Launch == nil {
		s.Launch = def.Launch
	}
	if s.Retry == nil {
		s.Retry = def.Retry
	}
	s.inheritPool(def)
	launch := Launch{Type: LaunchLocal}
	if s.Launch != nil {
		launch = *s.Launch
	}
	if launch.Type == "" {
		launch.Type = LaunchLocal
	}
	s.Launch = &launch
	env := map[string]string{}
	for k, v := range def.Env {
		env[k] = v
	}
	for k, v := range s.Env {
		env[k] = v
	}
	s.Env = env
	return s
}

// Names lists the activities in a stable order: dependencies first, then by
// name.
func (d *Workflow) Names() []string {
	var out []string
	done := map[string]bool{}
	var visit func(n string)
	visit = func(n string) {
		if done[n] {
			return
		}
		done[n] = true
		deps := slices.Clone(d.Activities[n].DependsOn)
		sort.Strings(deps)
		for _, up := range deps {
			visit(up)
		}
		out = append(out, n)
	}
	names := make([]string, 0, len(d.Activities))
	for n := range d.Activities {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		visit(n)
	}
	return out
}

// JSON is the definition as stored with an execution.
func (d *Workflow) JSON() string {
	b, err := json.Marshal(d)
	if err != nil { // only maps of strings and plain types: cannot happen
		panic(err)
	}
	return string(b)
}
