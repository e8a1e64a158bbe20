package state

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Schedules start workflows by the clock (cron, fixed intervals) or after
// another workflow's completions (tokens). Any number of schedulers fire
// them, coordinated only by conditional writes to the schedule item: each
// write names the version it read, and a write whose version is stale is
// refused with a *ConflictError. Package schedule holds the logic; this is
// what it needs of a store besides the Store.

// Schedules holds the schedule items and the tokens counted for them.
type Schedules interface {
	// PutSchedule writes s if the stored item's version is prev (0: there
	// is none), with s.Version = prev+1. When token is not empty, the same
	// atomic write records that the upstream execution token was counted
	// for the schedule, and fails with an *ExistsError if it was already.
	// A stale prev returns a *ConflictError and writes nothing.
	PutSchedule(ctx context.Context, s *Schedule, prev int, token string) error
	// GetSchedule reads a schedule (strongly consistent); ErrNotFound if
	// there is none.
	GetSchedule(ctx context.Context, name string) (*Schedule, error)
	// DeleteSchedule deletes a schedule if its version is prev, and then
	// the token items it counted.
	DeleteSchedule(ctx context.Context, name string, prev int) error
	// Schedules lists every schedule, by name.
	Schedules(ctx context.Context) ([]*Schedule, error)
	// DueSchedules lists the names of the schedules whose next fire time
	// is at or before now, through an index holding only the schedules
	// that have a next fire time: its cost grows with the due schedules,
	// not with all of them. Index reads are eventually consistent: read
	// the item before acting on it.
	DueSchedules(ctx context.Context, now time.Time) ([]string, error)
}

// TokenRetention is how long the item that records a counted upstream
// execution is kept: it expires by expires_at, as an execution's items
// do, so that the schedule table (which `schedule list` scans) holds
// about a day of tokens. A token trigger looks again only at executions
// started within AfterLag of the latest it saw, and remembers those it
// counted, so the item guards a count long after it could be needed;
// deleting a schedule deletes its tokens too.
const TokenRetention = 24 * time.Hour

// ScheduleShards is how many index partitions the due schedules are spread
// over, so that no one partition takes every scheduler's reads and every
// cursor's writes. A scheduler queries each.
const ScheduleShards = 4

// Schedule is one schedule: what it starts, when, and where it is.
type Schedule struct {
	Name         string `json:"name"`                 // schedule_name
	WorkflowName string `json:"workflow_name"`        // workflow_name: the workflow it starts
	Definition   string `json:"definition,omitempty"` // definition: the workflow definition, as stored with an execution
	// Params are the run's declared params, as every fire gives them to
	// workflow.Start: those given and the definition's defaults. An item
	// may also hold params its definition does not declare, with their
	// values in the definition's defaults.env (WHIMBREL_PARAM_<NAME>):
	// those reach the runs through the environment alone.
	Params map[string]string `json:"params,omitempty"`

	// The trigger: one of Cron, Every, After.
	Cron      string   `json:"cron,omitempty"`      // cron: 5 fields or a descriptor such as @daily
	Every     Interval `json:"every,omitempty"`     // every: a fixed interval from Start
	After     string   `json:"after,omitempty"`     // after: the upstream workflow whose completions are tokens
	Threshold int      `json:"threshold,omitempty"` // threshold: tokens per run

	TimeZone   string    `json:"timezone"`          // timezone (IANA)
	Catchup    string    `json:"catchup"`           // catchup: all, latest or none
	MaxCatchup int       `json:"max_catchup"`       // max_catchup
	Start      time.Time `json:"start_time"`        // start_time: fire times are at or after it
	End        time.Time `json:"end_time,omitzero"` // end_time: and at or before it (zero: no end)
	SetTime    time.Time `json:"set_time"`          // set_time: when it was last set
	Paused     bool      `json:"paused"`            // paused
	// Overlap says what a fire does while the schedule's previous run is
	// still running: skip, queue, allow or cancel-previous; empty (an
	// item stored without it) allows.
	Overlap string `json:"overlap,omitempty"` // overlap

	// LastFire is the cursor: every fire time at or before it is done
	// (started, or skipped by the catch-up rule).
	LastFire time.Time `json:"last_fire,omitzero"` // last_fire
	// NextFire is the next fire time to do (zero: none, e.g. paused, past
	// its end, or a token trigger). The due index holds it.
	NextFire time.Time `json:"next_fire,omitzero"` // next_fire, next_fire_epoch

	// Tokens counts the upstream completions counted; Fired the runs a
	// token trigger started.
	Tokens int `json:"tokens,omitempty"` // tokens
	Fired  int `json:"fired,omitempty"`  // fired
	// Pending lists the fire times of token runs due but not yet started,
	// oldest first.
	Pending []time.Time `json:"pending,omitempty"` // pending
	// AfterSince is a token trigger's watermark: the latest start time of
	// an upstream execution it has seen. Its next look at the upstream
	// executions starts AfterLag before it; every execution started
	// before that is settled and looked at, or is in Unsettled.
	AfterSince time.Time `json:"after_since,omitzero"` // after_since
	// Counted remembers the upstream executions counted that the next
	// look may see again, so that a tick skips them without a write (the
	// token items, written with each count, are what makes counting
	// exactly once).
	Counted []string `json:"counted,omitempty"` // counted (a JSON list), oldest first
	// Unsettled lists the upstream executions started before the next
	// look's start that had not settled when the watermark passed them:
	// a tick reads each by ID, so that one long run does not hold the
	// watermark back.
	Unsettled []string `json:"unsettled,omitempty"` // unsettled (a JSON list)

	// Runs is the run log: the most recent fires and skips, newest first.
	Runs []ScheduleRun `json:"run_log,omitempty"` // run_log

	Version int `json:"version"` // version: raised by every write
}

// ScheduleRun is one line of a schedule's run log: a fire time started
// (WorkflowExecID set), skipped (neither it nor StartError), or not
// started yet because starting it failed (StartError set).
type ScheduleRun struct {
	Fire           time.Time `json:"fire"`                       // the fire time
	RequestID      string    `json:"request_id,omitempty"`       // NAME@T
	WorkflowExecID string    `json:"workflow_exec_id,omitempty"` // the execution started
	// At is the wall-clock time the scheduler started the run (or
	// skipped the fire time, or last tried): Fire is when it was due.
	At time.Time `json:"at"`
	// Note says what else happened, e.g. which fire times were skipped.
	Note string `json:"note,omitempty"`
	// StartError is why the last try to start the run failed; it is
	// cleared when a later try starts it.
	StartError string `json:"start_error,omitempty"`
	// Tries counts the tries to start the run, when more than one was
	// needed or none succeeded yet.
	Tries int `json:"tries,omitempty"`
	// RetryAt is when a scheduler tries again to start a run that failed
	// to start (by the ticks' clock).
	RetryAt time.Time `json:"retry_at,omitzero"`
}

// Failed reports whether the line is a fire time whose run failed to
// start and was not started since.
func (r ScheduleRun) Failed() bool { return r.StartError != "" && r.WorkflowExecID == "" }

// Interval is a schedule's fixed interval. Its JSON is a duration string
// such as "1h0m0s"; a number of nanoseconds is read too.
type Interval time.Duration

// Duration is the interval as a time.Duration.
func (i Interval) Duration() time.Duration { return time.Duration(i) }

func (i Interval) String() string { return time.Duration(i).String() }

// MarshalJSON writes the interval as a duration string.
func (i Interval) MarshalJSON() ([]byte, error) { return json.Marshal(i.String()) }

// UnmarshalJSON reads a duration string or a number of nanoseconds.
func (i *Interval) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("every %q: %w", s, err)
		}
		*i = Interval(d)
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("every: want a duration such as \"1h0m0s\" or nanoseconds, got %s", b)
	}
	*i = Interval(n)
	return nil
}
