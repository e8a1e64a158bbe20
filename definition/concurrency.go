package definition

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// Concurrency bounds the executions of one workflow (by name) that run at
// once, across every starter: a start beyond MaxActiveRuns stays
// REQUESTED until a run of the workflow ends, and the waiting runs start
// oldest first (docs/pools.md#run-concurrency).
type Concurrency struct {
	// MaxActiveRuns is how many executions may be RUNNING at once; 0
	// means no limit.
	MaxActiveRuns int `yaml:"max_active_runs,omitempty" json:"max_active_runs,omitempty"`
}

// MaxActiveRunsLimit bounds max_active_runs: the runs' slots are a pool's,
// which holds at most this many.
const MaxActiveRunsLimit = 10000

// concurrencyKeys are the fields of `concurrency:`.
var concurrencyKeys = []string{"max_active_runs"}

// MaxActiveRuns is the workflow's limit on running executions (0: none).
func (d *Workflow) MaxActiveRuns() int {
	if d == nil || d.Concurrency == nil {
		return 0
	}
	return d.Concurrency.MaxActiveRuns
}

// checkConcurrencyNode checks `concurrency:` where it is written, so that
// every problem names its line.
func checkConcurrencyNode(p *problems, v *yaml.Node) {
	if v.Kind != yaml.MappingNode {
		p.add(v.Line, "concurrency must be a mapping, e.g. {max_active_runs: 1}")
		return
	}
	checkKeys(p, v, "concurrency", concurrencyKeys)
	for i := 0; i+1 < len(v.Content); i += 2 {
		if v.Content[i].Value != "max_active_runs" {
			continue
		}
		val := resolve(v.Content[i+1])
		var n int
		if val.Kind != yaml.ScalarNode || val.Decode(&n) != nil || n < 1 || n > MaxActiveRunsLimit {
			p.add(val.Line, "concurrency: max_active_runs %q: give a whole number from 1 to %d (leave it out for no limit)", val.Value, MaxActiveRunsLimit)
		}
	}
}

// checkConcurrency checks the limit of a definition however it was read
// (a stored one has no lines).
func (d *Workflow) checkConcurrency() []string {
	if n := d.MaxActiveRuns(); n < 0 || n > MaxActiveRunsLimit {
		return []string{fmt.Sprintf("concurrency: max_active_runs %d: give a whole number from 1 to %d", n, MaxActiveRunsLimit)}
	}
	return nil
}

// MaxActiveRuns is the stored definition's max_active_runs (0: no limit).
func (s *Stored) MaxActiveRuns() int { return s.head.MaxActiveRuns() }
