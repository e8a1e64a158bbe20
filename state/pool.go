package state

import (
	"context"
	"fmt"
	"regexp"
	"time"
)

// Pools share a scarce resource (a database's connections, a licence
// server's seats) across every launcher and every workflow: an activity in
// a pool starts only while it holds its slots. The slots are the state: a
// pool is a definition item and one or more shard items, each shard with
// its capacity and the list of its holders, and every change to a shard is
// one write conditional on the version read (docs/contract.md#pools).
// There is no counter apart from the holders themselves, so nothing can
// drift; a holder whose activity is over is removed by the participant
// that records the end, and by anyone who finds its lease lapsed.

// PoolStore holds the pool items. Both stores implement it; the logic that
// uses it (acquire, release, resize) is in this package's pool functions,
// the same for every store.
type PoolStore interface {
	// PoolItems reads, consistently, a pool's definition (nil when the
	// pool is not defined) and its slot shards, by index.
	PoolItems(ctx context.Context, name string) (*Pool, []*PoolShard, error)
	// PutPool writes a pool's definition if the stored one is at version
	// prev (0: there is none), with p.Version = prev+1; a stale prev
	// returns a *ConflictError and writes nothing.
	PutPool(ctx context.Context, p *Pool, prev int) error
	// PutPoolShard writes a slot shard under the same condition.
	PutPoolShard(ctx context.Context, s *PoolShard, prev int) error
	// DeletePool deletes a pool's definition and its shards; ErrNotFound
	// when it is not defined.
	DeletePool(ctx context.Context, name string) error
	// ListPools lists the pools' definitions, by name (a scan: for the
	// operator, never for a launcher's pass).
	ListPools(ctx context.Context) ([]*Pool, error)
}

// Pool is a pool's definition.
type Pool struct {
	Name        string    `json:"name"`        // pool_name
	Slots       int       `json:"slots"`       // slots: how many may be held at once
	Description string    `json:"description"` // description
	SetTime     time.Time `json:"set_time"`    // set_time: when it was last set
	Version     int       `json:"version"`     // version: of the conditional writes
}

// PoolShard is a part of a pool's slots: at most Capacity of them are
// held by its Holders. A pool's shards together have its Slots.
type PoolShard struct {
	Pool     string       // pool_name
	Index    int          // from the entry "slots/<index>"
	Capacity int          // capacity
	Holders  []PoolHolder // holders (a JSON list)
	Version  int          // version
}

// Held is how many slots the shard's holders hold.
func (s *PoolShard) Held() int {
	n := 0
	for _, h := range s.Holders {
		n += h.Slots
	}
	return n
}

// PoolHolder is an activity execution holding slots of a pool.
type PoolHolder struct {
	ActivityExecID string    `json:"activity_exec_id"`
	WorkflowExecID string    `json:"workflow_exec_id"`
	WorkflowName   string    `json:"workflow_name,omitempty"`
	ActivityName   string    `json:"activity_name,omitempty"`
	Slots          int       `json:"slots"`
	Since          time.Time `json:"since"`
	// LeaseUntil is when whoever finds the holder next looks at its
	// activity: one that is still queued or running keeps its slots (the
	// lease is renewed), any other is removed.
	LeaseUntil time.Time `json:"lease_until"`
}

// Key is the holder's activity.
func (h PoolHolder) Key() ActivityKey {
	return ActivityKey{ActivityExecID: h.ActivityExecID, WorkflowExecID: h.WorkflowExecID}
}

// Limits and defaults of pools.
const (
	// SlotsPerShard is how many slots one shard item holds at most. A
	// write to a shard rewrites its holders, about 250 bytes each, so a
	// full shard's write stays within 3 write units, and the writes of a
	// large pool spread over many keys instead of one, which DynamoDB
	// caps at 1,000 write units a second.
	SlotsPerShard = 8
	// MaxPoolSlots bounds a pool's size.
	MaxPoolSlots = 10000
	// PoolLease is how long a holder keeps its slots before whoever finds
	// it looks at its activity again. It bounds how long slots stay held
	// by an activity that will never run (a launcher that died between
	// taking the slots and queueing the activity).
	PoolLease = time.Minute
)

var poolName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$`)

// CheckPoolName returns an error saying what a pool's name may be.
func CheckPoolName(name string) error {
	if !poolName.MatchString(name) {
		return fmt.Errorf("pool name %q: use 1 to 100 letters, digits, '_', '.' or '-', starting with a letter or digit", name)
	}
	return nil
}

// PoolWaitError says why an activity does not hold its slots yet: the
// pool is full, or not defined. The activity stays READY.
type PoolWaitError struct {
	Pool   string
	Reason string // e.g. "not defined", "3 of 3 slots held"
}

func (e *PoolWaitError) Error() string {
	return fmt.Sprintf("waiting for pool %s: %s", e.Pool, e.Reason)
}
