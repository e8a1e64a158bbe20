package workflow

import "sync"

// shared holds the last stored definition parsed by ParseStoredShared:
// one process (a wrapper: its data, then its advance) reads the same
// definition more than once, and a definition of thousands of activities
// takes milliseconds to decode and check.
var shared struct {
	sync.Mutex
	text string
	def  *Definition
}

// ParseStoredShared is ParseStored, sharing the result with the other
// callers in this process that parse the same text: read the definition,
// never change it.
func ParseStoredShared(s string) (*Definition, error) {
	shared.Lock()
	if shared.def != nil && shared.text == s {
		d := shared.def
		shared.Unlock()
		return d, nil
	}
	shared.Unlock()
	d, err := ParseStored(s)
	if err != nil {
		return nil, err
	}
	shared.Lock()
	shared.text, shared.def = s, d
	shared.Unlock()
	return d, nil
}

// hasDependents reports whether any activity waits on name, without the
// topological order Names builds: after most activities, none does.
func (d *Definition) hasDependents(name string) bool {
	for _, a := range d.Activities {
		for _, up := range a.DependsOn {
			if up == name {
				return true
			}
		}
	}
	return false
}
