package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/whimbrel/whimbrel/heartbeat"
	"github.com/whimbrel/whimbrel/state"
)

// Definition is a workflow as its author writes it, in YAML (or JSON):
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
type Definition struct {
	Name        string `yaml:"name" json:"name"`
	Description string `yaml:"description,omitempty" json:"description,omitempty"`
	// Retention is how long an execution's items are kept once it settled
	// (DynamoDB's TTL deletes them then); zero keeps them.
	Retention  Duration             `yaml:"retention,omitempty" json:"retention,omitempty"`
	Defaults   Settings             `yaml:"defaults,omitempty" json:"defaults,omitempty"`
	Activities map[string]*Activity `yaml:"activities" json:"activities"`
	// Params declares the execution's parameters (see Param).
	Params map[string]*Param `yaml:"params,omitempty" json:"params,omitempty"`
}

// Activity is one step of a workflow.
type Activity struct {
	Description string   `yaml:"description,omitempty" json:"description,omitempty"`
	Command     []string `yaml:"command,omitempty" json:"command,omitempty"`
	DependsOn   []string `yaml:"depends_on,omitempty" json:"depends_on,omitempty"`
	Settings    `yaml:",inline" json:",inline"`
}

// Settings apply to an activity; those under defaults apply to every
// activity that does not set its own.
type Settings struct {
	Env               map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	HeartbeatInterval Duration          `yaml:"heartbeat_interval,omitempty" json:"heartbeat_interval,omitempty"`
	HeartbeatTimeout  Duration          `yaml:"heartbeat_timeout,omitempty" json:"heartbeat_timeout,omitempty"`
	// Timeout caps the command's run time (whimbrel-run --timeout).
	Timeout Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	// QueuedTimeout is how long the activity may wait between its launch and
	// its start before the monitor fails it (default 10 minutes).
	QueuedTimeout Duration `yaml:"queued_timeout,omitempty" json:"queued_timeout,omitempty"`
	KillGrace     Duration `yaml:"kill_grace,omitempty" json:"kill_grace,omitempty"`
	Launch        *Launch  `yaml:"launch,omitempty" json:"launch,omitempty"`
	// Retry runs the activity again when it fails or times out (see
	// Retry); an activity's own replaces the defaults' as a whole.
	Retry *Retry `yaml:"retry,omitempty" json:"retry,omitempty"`
}

// Launch says how an activity is started.
type Launch struct {
	// Type is local (a child process of the launcher, the default), docker
	// or ecs.
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
func (d *Definition) Effective(name string) Settings {
	a := d.Activities[name]
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
func (d *Definition) Names() []string {
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
func (d *Definition) JSON() string {
	b, err := json.Marshal(d)
	if err != nil { // only maps of strings and plain types: cannot happen
		panic(err)
	}
	return string(b)
}

// ParseStored reads a definition stored with an execution.
func ParseStored(s string) (*Definition, error) {
	var d Definition
	if err := json.Unmarshal([]byte(s), &d); err != nil {
		return nil, fmt.Errorf("stored definition: %w", err)
	}
	if err := d.validate("stored definition", nil); err != nil {
		return nil, err
	}
	return &d, nil
}

// Load reads and checks a definition file.
func Load(path string) (*Definition, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read workflow definition: %w", err)
	}
	return Parse(path, b)
}

// Parse reads and checks a definition; file names it in errors. Every
// problem found is reported, each with its line.
func Parse(file string, b []byte) (*Definition, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: the file is empty: a workflow needs a name and activities", file)
		}
		return nil, fmt.Errorf("%s: %s", file, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s:%d: a second YAML document: a file holds one workflow", file, more.Line)
	}
	if len(root.Content) == 0 {
		return nil, fmt.Errorf("%s: the file is empty: a workflow needs a name and activities", file)
	}
	doc := root.Content[0]
	if len(b) > maxDefinition {
		return nil, fmt.Errorf("%s: %d bytes is more than a workflow definition may be (%d)", file, len(b), maxDefinition)
	}
	p := &problems{file: file, open: map[*yaml.Node]bool{}, done: map[*yaml.Node]bool{}}
	checkKeys(p, doc, "the workflow", topKeys)
	if p.err() != nil {
		return nil, p.err()
	}
	var d Definition
	if err := doc.Decode(&d); err != nil {
		return nil, fmt.Errorf("%s: %s", file, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	lines := map[string]int{}
	if acts := field(doc, "activities"); acts != nil && acts.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(acts.Content); i += 2 {
			lines[acts.Content[i].Value] = acts.Content[i].Line
		}
	}
	if err := d.validate(file, lines); err != nil {
		return nil, err
	}
	return &d, nil
}

var (
	topKeys      = []string{"name", "description", "retention", "defaults", "activities", "params"}
	settingKeys  = []string{"env", "heartbeat_interval", "heartbeat_timeout", "timeout", "queued_timeout", "kill_grace", "launch", "retry"}
	activityKeys = append([]string{"description", "command", "depends_on"}, settingKeys...)
	launchKeys   = []string{"type", "image", "docker_args", "cluster", "task_definition", "container", "launch_type",
		"platform_version", "subnets", "security_groups", "assign_public_ip", "capacity_provider", "retry_for"}
)

// maxDefinition bounds a definition's size: it is stored with every
// execution, in one item.
const maxDefinition = 256 << 10

// problems collects the errors of one definition.
type problems struct {
	file string
	list []string
	open map[*yaml.Node]bool // the mappings being checked, to catch a merge into itself
	done map[*yaml.Node]bool // the mappings checked: anchors merged many times are checked once
}

func (p *problems) add(line int, format string, args ...any) {
	loc := p.file
	if line > 0 {
		loc = fmt.Sprintf("%s:%d", p.file, line)
	}
	p.list = append(p.list, loc+": "+fmt.Sprintf(format, args...))
}

func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	return errors.New(strings.Join(p.list, "\n"))
}

func field(m *yaml.Node, key string) *yaml.Node {
	m = resolve(m)
	if m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return resolve(m.Content[i+1])
		}
	}
	return nil
}

// resolve follows an alias (*name) to the node its anchor (&name) marks.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// The kinds of the fields' values.
var (
	durationKeys = []string{"heartbeat_interval", "heartbeat_timeout", "timeout", "queued_timeout", "kill_grace", "retention", "retry_for",
		"interval", "max_delay"}
	listKeys = []string{"command", "depends_on", "docker_args", "subnets", "security_groups"}
	textKeys = []string{"name", "description", "type", "image", "cluster", "task_definition", "container",
		"launch_type", "platform_version", "capacity_provider"}
)

// checkValue checks the kind of one field's value where the YAML still
// knows its line.
func checkValue(p *problems, key string, v *yaml.Node, where string) {
	v = resolve(v)
	isNull := v.Kind == yaml.ScalarNode && v.Tag == "!!null"
	switch {
	case slices.Contains(durationKeys, key):
		if v.Kind != yaml.ScalarNode || isNull {
			p.add(v.Line, "%s: %s must be a duration such as 30s, 15m or 1h", where, key)
			return
		}
		if d, err := ParseDuration(v.Value); err != nil {
			p.add(v.Line, "%s: %s %q is not a duration: write it as 30s, 15m, 1h or 7d", where, key, v.Value)
		} else if d < 0 {
			p.add(v.Line, "%s: %s %q is negative", where, key, v.Value)
		}
	case slices.Contains(listKeys, key):
		if v.Kind != yaml.SequenceNode {
			p.add(v.Line, "%s: %s must be a list, such as [a, b]", where, key)
			return
		}
		for _, e := range v.Content {
			e = resolve(e)
			if e.Kind != yaml.ScalarNode || e.Tag == "!!null" || e.Value == "" {
				p.add(e.Line, "%s: %s holds an empty or non-text entry", where, key)
			}
		}
	case slices.Contains(textKeys, key):
		if v.Kind != yaml.ScalarNode || isNull {
			p.add(v.Line, "%s: %s must be text", where, key)
		}
	case key == "env":
		if v.Kind != yaml.MappingNode {
			p.add(v.Line, "%s: env must be a mapping of NAME: value", where)
			return
		}
		for i := 0; i+1 < len(v.Content); i += 2 {
			if val := resolve(v.Content[i+1]); val.Kind != yaml.ScalarNode {
				p.add(val.Line, "%s: env %s must be text", where, v.Content[i].Value)
			}
		}
	case slices.Contains(retryValueKeys, key):
		checkRetryValue(p, key, v, where)
	case key == "assign_public_ip", key == "required":
		if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" {
			p.add(v.Line, "%s: %s must be true or false", where, key)
		}
	case key == "default":
		if v.Kind != yaml.ScalarNode || isNull {
			p.add(v.Line, "%s: default must be text", where)
		}
	}
}

// checkKeys refuses unknown and repeated keys of a mapping, suggesting the
// nearest known key, and descends into the mappings it knows.
func checkKeys(p *problems, m *yaml.Node, where string, known []string) {
	m = resolve(m)
	if m.Kind != yaml.MappingNode {
		p.add(m.Line, "%s must be a mapping of fields", where)
		return
	}
	if p.open[m] {
		p.add(m.Line, "%s merges (<<) a mapping into itself", where)
		return
	}
	if p.done[m] {
		return
	}
	p.open[m] = true
	defer func() { delete(p.open, m); p.done[m] = true }()
	seen := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], resolve(m.Content[i+1])
		if k.Value == "<<" { // a merge key brings in the fields of an anchor
			merged := []*yaml.Node{v}
			if v.Kind == yaml.SequenceNode {
				merged = v.Content
			}
			for _, mm := range merged {
				checkKeys(p, mm, where, known)
			}
			continue
		}
		if where == "the workflow" && strings.HasPrefix(k.Value, "x-") {
			continue // a place for anchors, by convention
		}
		if first, dup := seen[k.Value]; dup {
			p.add(k.Line, "%s: %q is given twice (first at line %d)", where, k.Value, first)
			continue
		}
		seen[k.Value] = k.Line
		if !slices.Contains(known, k.Value) {
			msg := fmt.Sprintf("%s: unknown field %q", where, k.Value)
			if s := suggest(k.Value, known); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			} else {
				msg += " (known: " + strings.Join(known, ", ") + ")"
			}
			p.add(k.Line, "%s", msg)
			continue
		}
		checkValue(p, k.Value, v, where)
		switch k.Value {
		case "defaults":
			checkKeys(p, v, "defaults", settingKeys)
		case "launch":
			checkKeys(p, v, where+": launch", launchKeys)
		case "retry":
			checkKeys(p, v, where+": retry", retryKeys)
		case "params":
			if v.Kind != yaml.MappingNode {
				p.add(v.Line, "params must be a mapping from parameter name to {required, default, description}")
				continue
			}
			for j := 0; j+1 < len(v.Content); j += 2 {
				name, decl := v.Content[j], resolve(v.Content[j+1])
				if decl.Kind == yaml.ScalarNode && decl.Tag == "!!null" {
					continue // declared, optional, no default
				}
				checkKeys(p, decl, fmt.Sprintf("param %q", name.Value), paramKeys)
			}
		case "activities":
			if v.Kind != yaml.MappingNode {
				p.add(v.Line, "activities must be a mapping from activity name to activity")
				continue
			}
			names := map[string]int{}
			for j := 0; j+1 < len(v.Content); j += 2 {
				name, act := v.Content[j], resolve(v.Content[j+1])
				if first, dup := names[name.Value]; dup {
					p.add(name.Line, "activity %q is defined twice (first at line %d)", name.Value, first)
					continue
				}
				names[name.Value] = name.Line
				if act.Kind == yaml.ScalarNode && act.Tag == "!!null" {
					p.add(name.Line, "activity %q is empty: give it a command (or a launch)", name.Value)
					continue
				}
				checkKeys(p, act, fmt.Sprintf("activity %q", name.Value), activityKeys)
			}
		}
	}
}

// suggest returns the known key nearest to s, if it is near enough to be a
// typo. A few lines of edit distance do not warrant a dependency.
func suggest(s string, known []string) string {
	best, bestD := "", 3 // at most two edits away
	for _, k := range known {
		if d := editDistance(s, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// validate checks what the YAML structure cannot: names, dependencies,
// cycles, settings. lines gives each activity's line, when known.
func (d *Definition) validate(file string, lines map[string]int) error {
	p := &problems{file: file}
	d.checkHead(p)
	names := make([]string, 0, len(d.Activities))
	for n := range d.Activities {
		names = append(names, n)
	}
	sort.Strings(names)
	isActivity := func(n string) bool { return d.Activities[n] != nil }
	for _, n := range names {
		d.checkActivity(p, n, lines[n], names, isActivity)
	}
	if p.err() == nil {
		if cycle := d.cycle(names); cycle != nil {
			p.add(lines[cycle[0]], "the activities form a cycle: %s", strings.Join(cycle, " → "))
		}
	}
	return p.err()
}

// checkHead checks what applies to the whole workflow: its name, that it
// has activities, the defaults and the parameters.
func (d *Definition) checkHead(p *problems) {
	if d.Name == "" {
		p.add(0, "the workflow has no name: add `name: my-workflow`")
	} else if err := state.CheckName(d.Name); err != nil {
		p.add(0, "workflow %v", err)
	}
	if len(d.Activities) == 0 {
		p.add(0, "the workflow has no activities: add at least one under `activities:`")
	}
	if err := d.Defaults.check(); err != nil {
		p.add(0, "defaults: %v", err)
	}
	d.checkParams(p)
}

// checkActivity checks activity n of d.Activities: its name, its
// depends_on (isActivity says which names are activities of the
// workflow; names, when given, are suggested for a misspelt one), its
// settings with the defaults, and its templates.
func (d *Definition) checkActivity(p *problems, n string, line int, names []string, isActivity func(string) bool) {
	a := d.Activities[n]
	if a == nil {
		p.add(line, "activity %q is empty: give it a command (or a launch)", n)
		return
	}
	if err := state.CheckName(n); err != nil {
		p.add(line, "activity %v", err)
	}
	seen := map[string]bool{}
	for _, up := range a.DependsOn {
		switch {
		case up == n:
			p.add(line, "activity %q depends on itself", n)
		case seen[up]:
			p.add(line, "activity %q lists %q twice in depends_on", n, up)
		case !isActivity(up):
			msg := fmt.Sprintf("activity %q depends on %q, which is not an activity of this workflow", n, up)
			if s := suggest(up, names); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			p.add(line, "%s", msg)
		}
		seen[up] = true
	}
	eff := d.Effective(n)
	if err := eff.check(); err != nil {
		p.add(line, "activity %q: %v", n, err)
	}
	d.checkTemplates(p, n, line, eff.Env)
	qt := time.Duration(eff.QueuedTimeout)
	if qt == 0 {
		qt = DefaultQueuedTimeout
	}
	if rf := time.Duration(eff.Launch.RetryFor); rf >= qt {
		p.add(line, "activity %q: launch.retry_for %s is not shorter than its queued_timeout %s: the monitor would fail the launch while the launcher still retries it", n, rf, qt)
	}
	if len(a.Command) == 0 && eff.Launch.Type == LaunchLocal {
		p.add(line, "activity %q has no command: give one as a list, such as [\"sh\", \"-c\", \"echo hello\"]", n)
	}
}

func (s Settings) check() error {
	var errs []string
	// One given alone is checked against the other's default.
	if err := heartbeat.Check(time.Duration(s.HeartbeatInterval), time.Duration(s.HeartbeatTimeout)); err != nil {
		errs = append(errs, err.Error())
	}
	if l := s.Launch; l != nil {
		switch l.Type {
		case "", LaunchLocal:
		case LaunchDocker:
			if l.Image == "" {
				errs = append(errs, "launch type docker needs an image")
			}
		case LaunchECS:
			if l.TaskDefinition == "" || l.Container == "" {
				errs = append(errs, "launch type ecs needs a task_definition and the container that runs whimbrel-run")
			}
			if l.LaunchType != "" && !slices.Contains([]string{"EC2", "FARGATE", "EXTERNAL"}, l.LaunchType) {
				errs = append(errs, fmt.Sprintf("launch_type %q is not EC2, FARGATE or EXTERNAL", l.LaunchType))
			}
			if l.LaunchType != "" && l.CapacityProvider != "" {
				errs = append(errs, "launch_type and capacity_provider exclude each other in RunTask: give one")
			}
			if len(l.SecurityGroups) > 0 && len(l.Subnets) == 0 {
				errs = append(errs, "security_groups need subnets (awsvpc networking)")
			}
		default:
			msg := fmt.Sprintf("launch type %q is unknown: use local, docker or ecs", l.Type)
			if s := suggest(l.Type, []string{LaunchLocal, LaunchDocker, LaunchECS}); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			errs = append(errs, msg)
		}
	}
	if s.Retry != nil {
		errs = append(errs, s.Retry.check()...)
	}
	if len(errs) == 0 {
		return nil
	}
	return errors.New(strings.Join(errs, "; "))
}

// cycle returns the activities of a dependency cycle, first repeated last,
// or nil.
func (d *Definition) cycle(names []string) []string {
	const (
		unseen = iota
		onPath
		done
	)
	mark := map[string]int{}
	var path []string
	var found []string
	var visit func(n string) bool
	visit = func(n string) bool {
		mark[n] = onPath
		path = append(path, n)
		deps := slices.Clone(d.Activities[n].DependsOn)
		sort.Strings(deps)
		for _, up := range deps {
			switch mark[up] {
			case onPath:
				i := slices.Index(path, up)
				found = append(slices.Clone(path[i:]), up)
				return true
			case unseen:
				if visit(up) {
					return true
				}
			}
		}
		path = path[:len(path)-1]
		mark[n] = done
		return false
	}
	for _, n := range names {
		if mark[n] == unseen && visit(n) {
			// The path runs from dependents to what they wait on; show the
			// order in which things would run.
			slices.Reverse(found)
			return found
		}
	}
	return nil
}
