package definition

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/whimbrel/whimbrel/heartbeat"
	"github.com/whimbrel/whimbrel/state"
)

// validate checks what the YAML structure cannot: names, dependencies,
// cycles, settings, parameters, templates. pos gives the lines of the
// parts, when known. What it warns of is kept for Warnings.
func (d *Workflow) validate(file string, pos *positions) error {
	p := &problems{file: file, pos: pos}
	defer func() { d.warnings = p.warnings }()
	d.checkHead(p)
	names := make([]string, 0, len(d.Activities))
	for n := range d.Activities {
		names = append(names, n)
	}
	sort.Strings(names)
	isActivity := func(n string) bool { return d.Activities[n] != nil }
	for _, n := range names {
		d.checkActivity(p, n, pos.activityLine(n), names, isActivity)
	}
	d.checkControl(p)
	d.checkOutputs(p)
	if p.err() == nil {
		if cycle := d.cycle(names); cycle != nil {
			p.add(pos.activityLine(cycle[0]), "the activities form a cycle: %s", strings.Join(cycle, " → "))
		}
	}
	return p.err()
}

// checkHead checks what applies to the whole workflow: its name, that it
// has activities, the defaults and the parameters.
func (d *Workflow) checkHead(p *problems) {
	d.checkNotify(p)
	for _, e := range d.checkConcurrency() {
		p.add(0, "%s", e)
	}
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
func (d *Workflow) checkActivity(p *problems, n string, line int, names []string, isActivity func(string) bool) {
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
	d.checkForEach(p, n, line)
	qt := time.Duration(eff.QueuedTimeout)
	if qt == 0 {
		qt = DefaultQueuedTimeout
	}
	if rf := time.Duration(eff.Launch.RetryFor); rf >= qt {
		p.add(line, "activity %q: launch.retry_for %s is not shorter than its queued_timeout %s: the monitor would fail the launch while the launcher still retries it", n, rf, qt)
	}
	d.checkChild(p, n, line)
	if len(a.Command) == 0 && eff.Launch.Type == LaunchLocal && !a.IsChild() {
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
		case LaunchKubernetes:
			errs = append(errs, l.checkKubernetes()...)
		default:
			msg := fmt.Sprintf("launch type %q is unknown: use local, docker, ecs or kubernetes", l.Type)
			if s := suggest(l.Type, []string{LaunchLocal, LaunchDocker, LaunchECS, LaunchKubernetes}); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			errs = append(errs, msg)
		}
	}
	if s.Retry != nil {
		errs = append(errs, s.Retry.check()...)
	}
	errs = append(errs, s.checkPool()...)
	if len(errs) == 0 {
		return nil
	}
	return errors.New(strings.Join(errs, "; "))
}

// cycle returns the activities of a dependency cycle, first repeated last,
// or nil.
func (d *Workflow) cycle(names []string) []string {
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
