package definition

import (
	"bytes"
	"sort"
)

// IsFinally reports whether name is one of the definition's finally
// activities.
func (s *Stored) IsFinally(name string) bool { return s.head.Finally[name] != nil }

// FinallyNames lists the finally activities (see Workflow.FinallyNames).
func (s *Stored) FinallyNames() []string { return s.head.FinallyNames() }

// Controlled reports whether the definition uses control flow (see
// Workflow.Controlled). An entry is not decoded to answer: one that
// mentions when or trigger_rule counts, which at worst takes the general
// path for a workflow that would not need it.
func (s *Stored) Controlled() bool {
	s.controlledOnce.Do(func() { s.controlled = s.mentionsControl() })
	return s.controlled
}

// mentionsControl is Controlled, worked out: it reads every entry, so
// Controlled keeps its answer (an advance asks it for every activity).
func (s *Stored) mentionsControl() bool {
	if len(s.head.Finally) > 0 {
		return true
	}
	for _, raw := range s.entries {
		if bytes.Contains(raw, []byte(`"when"`)) || bytes.Contains(raw, []byte(`"trigger_rule"`)) {
			return true
		}
	}
	return false
}

// Names lists the activities of the workflow, not the finally ones, by
// name.
func (s *Stored) Names() []string {
	out := make([]string, 0, len(s.entries))
	for n := range s.entries {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Params are the parameters the definition declares.
func (s *Stored) Params() map[string]*Param { return s.head.Params }

func (s *Stored) finallyDependents(name string) []string {
	var out []string
	for n, a := range s.head.Finally {
		if a != nil && containsString(a.DependsOn, name) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
