// Package report is the wrapper's side of the Simple Lambda API
// (whimbrel-run --api simple): a wrapper.Reporter that writes the
// activity's moves as activity events for a processor to apply, instead of
// writing the activity itself. It links neither the processor nor the
// Lambda runtime nor the Streams client.
package report

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/state"
)

// Store is what a Client needs of a store: the reads the wrapper makes,
// and the events it writes and reads back.
type Store interface {
	GetWorkflow(ctx context.Context, workflowExecID string) (*state.WorkflowExec, error)
	GetActivity(ctx context.Context, key state.ActivityKey) (*state.ActivityExec, error)
	Activities(ctx context.Context, workflowExecID string) ([]*state.ActivityExec, error)
	PutEvent(ctx context.Context, e *state.ActivityEvent) error
	GetEvent(ctx context.Context, id, activityExecID string) (*state.ActivityEvent, error)
	RecordEvent(ctx context.Context, id, activityExecID string, o state.Outcome) error
}

// Client is a wrapper.Reporter whose activity writes become activity
// events for a processor to apply. Reads go to the store. The wrapper
// still learns what it must: a claim returns once the processor applied
// it (or rejected it), and a heartbeat reads the activity back, so a
// cancellation or a lost lease still stops the command.
//
// It writes nothing else: the processor advances the workflow, so
// Recorded does nothing.
type Client struct {
	Store
	// Source is recorded on every event.
	Source string
	// ClaimWait bounds how long a claim waits for a processor to decide
	// it (default DefaultClaimWait). When it passes, the claim is
	// withdrawn: its event is marked rejected, so no processor applies
	// it later, and the command is not started.
	ClaimWait time.Duration
	// ApplyWait bounds how long the final event's outcome is waited for
	// (default DefaultApplyWait): it is written either way.
	ApplyWait time.Duration
	Logger    hclog.Logger
}

// Defaults of Client.
const (
	DefaultClaimWait = 45 * time.Second
	DefaultApplyWait = 30 * time.Second
)

// pollEvery is how often the client reads back what a processor did.
const pollEvery = 100 * time.Millisecond

func (c *Client) log() hclog.Logger {
	if c.Logger == nil {
		return hclog.NewNullLogger()
	}
	return c.Logger
}

// UpdateActivity implements wrapper.Reporter by writing the change as an event.
// A claim waits until the processor decided it; it returns the claimed
// activity, or a *state.ConflictError saying who holds it instead. A final
// move waits up to ApplyWait for the outcome.
func (c *Client) UpdateActivity(ctx context.Context, key state.ActivityKey, ch state.ActivityChange) (*state.ActivityExec, error) {
	if ch.To == "" {
		if ch.Beat {
			// A heartbeat that carries the command's progress.
			if err := c.beat(ctx, key, ch.Owner, ch.At, ch.Progress); err != nil {
				return nil, err
			}
		}
		// Recording an exit beside a final state: the processor did so
		// when it found the final event's activity already final.
		return c.GetActivity(ctx, key)
	}
	ev := &state.ActivityEvent{
		ActivityExecID: key.ActivityExecID, WorkflowExecID: key.WorkflowExecID,
		When: state.Truncate(time.Now()), Source: c.Source, Transition: string(ch.To),
		Owner: ch.Owner, Error: ch.Error, Reason: ch.Reason, Output: ch.Output, Progress: ch.Progress,
	}
	if cl := ch.Claim; cl != nil {
		ev.Owner, ev.Host, ev.PID = cl.Owner, cl.Host, cl.PID
		ev.HeartbeatEnabled, ev.HeartbeatInterval, ev.HeartbeatTimeout = cl.HeartbeatEnabled, cl.HeartbeatInterval, cl.HeartbeatTimeout
	}
	if ch.Exit != nil {
		code := ch.Exit.Code
		ev.ExitCode, ev.Signal = &code, ch.Exit.Signal
	}
	// The ID follows from the owner and the move, so a write repeated
	// after a lost answer is the same event.
	ev.ActivityEventID = state.ActivityEventIDFor(key.ActivityExecID, ev.Owner+"/"+ev.Transition)
	if err := c.PutEvent(ctx, ev); err != nil && !errors.Is(err, state.ErrExists) {
		return nil, err
	}
	c.log().Debug("event written", "activity_event_id", ev.ActivityEventID, "transition", ev.Transition)

	// The waits have their own bounds: a caller's short attempt
	// deadline would otherwise cut them, and a repeated write would only
	// find the same event.
	d, def := c.ApplyWait, DefaultApplyWait
	if ch.Claim != nil {
		d, def = c.ClaimWait, DefaultClaimWait
	}
	if d <= 0 {
		d = def
	}
	wait, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
	defer cancel()
	for {
		got, err := c.GetEvent(wait, ev.ActivityEventID, key.ActivityExecID)
		if err == nil && got.Outcome.Processed() {
			return c.decided(wait, key, ev, got.Outcome)
		}
		if err != nil && wait.Err() == nil {
			c.log().Debug("reading the event back failed; trying again", "error", err)
		}
		select {
		case <-wait.Done():
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if ch.Claim == nil {
				c.log().Warn("the final event is written, but no processor has applied it yet", "activity_event_id", ev.ActivityEventID)
				return c.GetActivity(rctx, key)
			}
			// Withdraw the claim, so that a processor arriving later
			// does not make the activity RUNNING with nobody running it.
			why := fmt.Sprintf("the wrapper gave up waiting for a processor after %s and did not start its command", d)
			err := c.RecordEvent(rctx, ev.ActivityEventID, key.ActivityExecID, state.Rejected("%s", why))
			if errors.Is(err, state.ErrConflict) { // decided just now
				if got, err := c.GetEvent(rctx, ev.ActivityEventID, key.ActivityExecID); err == nil {
					return c.decided(rctx, key, ev, got.Outcome)
				}
			}
			if err != nil {
				return nil, fmt.Errorf("no processor applied claim event %s in %s, and withdrawing it failed: %w", ev.ActivityEventID, d, err)
			}
			a, err := c.GetActivity(rctx, key)
			if err != nil {
				return nil, err
			}
			return nil, &state.ConflictError{Kind: "activity", ID: key.ActivityExecID,
				Want:  fmt.Sprintf("claim event %s applied within %s: is whimbrel-poller (or the Lambda function) running?", ev.ActivityEventID, d),
				State: string(a.State), Owner: a.Owner, Attempt: a.Attempt}
		case <-time.After(pollEvery):
		}
	}
}

// decided returns the activity after its event was decided, or a
// *state.ConflictError saying why the event was rejected.
func (c *Client) decided(ctx context.Context, key state.ActivityKey, ev *state.ActivityEvent, o state.Outcome) (*state.ActivityExec, error) {
	a, err := c.GetActivity(ctx, key)
	if err != nil {
		return nil, err
	}
	if o.Result == state.OutcomeRejected {
		return nil, &state.ConflictError{Kind: "activity", ID: key.ActivityExecID,
			Want:  "event " + ev.ActivityEventID + " applied, but: " + o.Reason,
			State: string(a.State), Owner: a.Owner, Attempt: a.Attempt}
	}
	return a, nil
}

// Heartbeat implements wrapper.Reporter: it writes a heartbeat event, then reads
// the activity to learn whether the lease still holds.
func (c *Client) Heartbeat(ctx context.Context, key state.ActivityKey, owner string, at time.Time) error {
	return c.beat(ctx, key, owner, at, "")
}

// beat writes a heartbeat event, with the command's progress if any.
func (c *Client) beat(ctx context.Context, key state.ActivityKey, owner string, at time.Time, progress string) error {
	if at.IsZero() {
		at = time.Now()
	}
	at = state.Truncate(at)
	ev := &state.ActivityEvent{
		ActivityEventID: state.ActivityEventIDFor(key.ActivityExecID, owner+"/"+state.TransitionHeartbeat+"/"+strconv.FormatInt(at.UnixMilli(), 10)),
		ActivityExecID:  key.ActivityExecID, WorkflowExecID: key.WorkflowExecID,
		When: at, Source: c.Source, Transition: state.TransitionHeartbeat, Owner: owner, Progress: progress,
	}
	if err := c.PutEvent(ctx, ev); err != nil && !errors.Is(err, state.ErrExists) {
		return err
	}
	a, err := c.GetActivity(ctx, key)
	if err != nil {
		return err
	}
	if a.State != state.Running || a.Owner != owner {
		return &state.ConflictError{Kind: "activity", ID: key.ActivityExecID, Want: "state RUNNING held by " + owner,
			State: string(a.State), Owner: a.Owner, Attempt: a.Attempt}
	}
	return nil
}

// Recorded implements wrapper.Reporter: the processor that applied the
// final event advances the workflow.
func (c *Client) Recorded(context.Context, *state.ActivityExec, *state.WorkflowExec, hclog.Logger) (bool, error) {
	return false, nil
}
