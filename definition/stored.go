package definition

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/whimbrel/whimbrel/internal/jsonobj"
)

// Stored is a definition as stored with an execution, read for one
// activity at a time: a wrapper needs its own activity's entry and, once
// it ends, which activities wait on it; parsing and checking every entry
// of a workflow of thousands of activities would cost each of them
// milliseconds.
//
// The workflow's own fields (name, defaults, params, retention) are
// decoded and checked at once; each activity's entry when it is asked
// for, with the checks Parse makes of one activity. What spans the whole
// workflow (cycles, the other entries) is checked where a workflow is
// started, not here: an entry that cannot be read concerns the activities
// that read it, and no other.
//
// A Stored is safe for concurrent use.
type Stored struct {
	head    Workflow // Activities nil
	entries map[string]json.RawMessage

	mu      sync.Mutex
	decoded map[string]storedEntry

	controlledOnce sync.Once
	controlled     bool
	upstreams      upstreamIndex // stored_index.go
}

type storedEntry struct {
	a   *Activity
	err error
}

// readStored reads a definition stored with an execution (see Stored),
// afresh. An error means its workflow fields are unreadable: no entry can
// be trusted.
func readStored(s string) (*Stored, error) {
	var doc struct {
		Workflow
		Activities rawEntries `json:"activities"`
	}
	if err := json.Unmarshal([]byte(s), &doc); err != nil {
		return nil, fmt.Errorf("stored definition: %w", err)
	}
	st := &Stored{head: doc.Workflow, entries: doc.Activities, decoded: map[string]storedEntry{}}
	st.head.Activities = nil
	p := &problems{file: "stored definition"}
	if len(st.entries) == 0 {
		p.add(0, "the workflow has no activities: add at least one under `activities:`")
	}
	head := st.head
	head.Activities = map[string]*Activity{"": {}} // counted above
	head.checkHead(p)
	if err := p.err(); err != nil {
		return nil, err
	}
	return st, nil
}

// shared holds the last stored definition read by ReadStored: one
// process (a wrapper: its data, then its advance) reads the same
// definition more than once.
var shared struct {
	sync.Mutex
	text string
	def  *Stored
}

// ReadStored reads a definition stored with an execution for one activity
// at a time (see Stored). An error means its workflow fields are
// unreadable: no entry can be trusted. The result is shared with the other
// callers in this process that read the same text: one process (a
// wrapper: its data, then its advance) reads the same definition more
// than once, and a Stored is safe for concurrent use.
func ReadStored(s string) (*Stored, error) {
	shared.Lock()
	if shared.def != nil && shared.text == s {
		d := shared.def
		shared.Unlock()
		return d, nil
	}
	shared.Unlock()
	d, err := readStored(s)
	if err != nil {
		return nil, err
	}
	shared.Lock()
	shared.text, shared.def = s, d
	shared.Unlock()
	return d, nil
}

// Len is the number of activities the definition holds.
func (s *Stored) Len() int { return len(s.entries) }

// Retention is the definition's retention.
func (s *Stored) Retention() Duration { return s.head.Retention }

// Activity returns the entry of the named activity, decoded and checked
// as Parse checks one activity; an error says what is wrong with it, or
// that the definition has no such activity.
func (s *Stored) Activity(name string) (*Activity, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.decoded[name]; ok {
		return e.a, e.err
	}
	e := s.decode(name)
	s.decoded[name] = e
	return e.a, e.err
}

func (s *Stored) decode(name string) storedEntry {
	raw, ok := s.entries[name]
	if !ok && s.head.Finally[name] != nil {
		return storedEntry{a: s.head.Finally[name]} // checked with the head
	}
	if !ok {
		return storedEntry{err: fmt.Errorf("stored definition: no activity %q", name)}
	}
	var a *Activity
	if err := json.Unmarshal(raw, &a); err != nil {
		return storedEntry{err: fmt.Errorf("stored definition: activity %q: %w", name, err)}
	}
	one := s.head
	one.Activities = map[string]*Activity{name: a}
	p := &problems{file: "stored definition"}
	one.checkActivity(p, name, 0, nil, func(up string) bool {
		r, ok := s.entries[up]
		return ok && string(r) != "null"
	})
	if err := p.err(); err != nil {
		return storedEntry{err: err}
	}
	return storedEntry{a: a}
}

// Effective returns the named activity's settings with the defaults
// filled in (see Workflow.Effective); an error as Activity's.
func (s *Stored) Effective(name string) (Settings, error) {
	a, err := s.Activity(name)
	if err != nil {
		return Settings{}, err
	}
	one := s.head
	one.Activities = map[string]*Activity{name: a}
	return one.Effective(name), nil
}

// Dependents lists, by name, the activities whose depends_on names the
// given one. Only the entries that could name it are decoded: one that
// holds neither its quoted name nor an escape cannot. An error names an
// entry that could wait on it and cannot be read.
func (s *Stored) Dependents(name string) ([]string, error) {
	if s.IsFinally(name) {
		return s.finallyDependents(name), nil
	}
	// The name as an entry writes it unescaped: json.Marshal would write
	// <, > and & as \u003c and the like, which an entry need not.
	var quoted bytes.Buffer
	enc := json.NewEncoder(&quoted)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(name); err != nil {
		return nil, err
	}
	q := bytes.TrimSuffix(quoted.Bytes(), []byte("\n"))
	var out []string
	for n, raw := range s.candidates(name) {
		if !bytes.Contains(raw, q) && bytes.IndexByte(raw, '\\') < 0 {
			continue
		}
		a, err := s.Activity(n)
		if err != nil {
			return nil, err
		}
		if containsString(a.DependsOn, name) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

// rawEntries is the activities object of a stored definition, each entry
// left undecoded (encoding/json hands UnmarshalJSON one whole, valid
// value). Entries of a key given twice are merged, as into a map.
type rawEntries map[string]json.RawMessage

// UnmarshalJSON keeps each member of the activities object undecoded.
func (r *rawEntries) UnmarshalJSON(b []byte) error {
	if *r == nil {
		*r = rawEntries{}
	}
	err := jsonobj.Members(b, func(k string, v []byte) { (*r)[k] = v })
	if err != nil {
		return errors.New("activities is not an object of activities by name")
	}
	return nil
}
