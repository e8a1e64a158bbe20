package wrapper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
	"golang.org/x/sys/unix"

	"github.com/whimbrel/whimbrel/internal/fault"
	"github.com/whimbrel/whimbrel/internal/nudge"
	"github.com/whimbrel/whimbrel/state"
)

// finish records the outcome with fresh, bounded retries, then advances
// the workflow. It returns code, or state.ExitNotRecorded if nothing could be
// written.
func (r *run) finish(exit *state.Exit, stderrTail, reason string, code int) int {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.RecordTimeout)
	defer cancel()
	r.mu.Lock()
	stopped := r.stopReason != ""
	r.mu.Unlock()
	to := state.Failed
	if exit.Code == 0 && !stopped && !r.outputRefused {
		to = state.Completed
	}
	// The last progress the command wrote, which no heartbeat may have
	// carried yet, rides on the final write.
	var progress string
	if r.data != nil {
		var err error
		if progress, err = r.data.readProgress(); err != nil {
			r.log.Warn("progress not recorded", "error", err)
		}
	}
	tail := strings.ToValidUTF8(stderrTail, "\uFFFD")

	var final *state.ActivityExec
	op := func() error {
		ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
		defer cancel()
		c := state.ActivityChange{
			From: []state.ActivityState{state.Running}, To: to, Owner: r.owner,
			Exit: exit, Error: tail, Reason: reason, Output: r.output, Progress: progress,
		}
		if r.skipped {
			c.Exit, c.Skipped = nil, true // no command ran: no exit to record
		}
		a, err := r.st.UpdateActivity(ctx, r.cfg.Key, c)
		var ce *state.ConflictError
		switch {
		case err == nil:
			final = a
			return nil
		case errors.As(err, &ce) && ce.Owner == r.owner && ce.State == string(to):
			// An earlier attempt whose answer was lost did land.
			final, err = r.st.GetActivity(ctx, r.cfg.Key)
			return err
		case errors.As(err, &ce) && ce.Owner == r.owner &&
			(ce.State == string(state.CancelledRunning) || ce.State == string(state.TimedOut)):
			// The state is final; record how the command ended beside it.
			final, err = r.st.UpdateActivity(ctx, r.cfg.Key, state.ActivityChange{
				From: []state.ActivityState{state.ActivityState(ce.State)}, Owner: r.owner,
				Exit: exit, Error: tail, Reason: reason,
			})
			if errors.Is(err, state.ErrConflict) {
				return backoff.Permanent(err)
			}
			return err
		case errors.Is(err, state.ErrConflict), errors.Is(err, state.ErrNotFound), errors.Is(err, state.ErrInvalidItem):
			return backoff.Permanent(err)
		}
		r.log.Warn("recording the outcome failed; retrying", "error", err)
		return err
	}
	b := retryPolicy(200 * time.Millisecond)
	if err := backoff.Retry(op, backoff.WithContext(b, ctx)); err != nil {
		var ce *state.ConflictError
		if errors.As(err, &ce) {
			// Someone else holds the activity now; its record is theirs.
			r.log.Error("outcome not recorded: the activity is no longer ours", "error", err,
				"exit_code", exit.Code, "reason", reason)
			return code
		}
		why := "the store stayed unreachable"
		switch {
		case errors.Is(err, state.ErrNotFound):
			why = "the activity item is gone"
		case errors.Is(err, state.ErrInvalidItem):
			why = "the activity item is malformed"
		}
		r.log.Error("OUTCOME NOT RECORDED: "+why, "error", err,
			"state", to, "exit_code", exit.Code, "signal", exit.Signal, "reason", reason, "stderr_tail", tail)
		return state.ExitNotRecorded
	}
	r.log.Info("recorded", "state", final.State, "exit_code", exit.Code, "reason", reason)
	fault.Point(fault.AfterFinish)
	readied, err := r.st.Recorded(ctx, final, r.wf, r.log.Named("advance"))
	if err != nil {
		// The outcome is recorded; the monitor finishes the advance.
		r.log.Warn("advancing the workflow failed; the monitor will finish it", "error", err)
	}
	if readied && r.cfg.Readied != nil {
		r.cfg.Readied()
	}
	if readied && r.cfg.Nudge != "" {
		if err := nudge.Send(r.cfg.Nudge); err != nil {
			r.log.Debug("nudging the launcher failed; it will poll", "error", err)
		}
	}
	return code
}

func describeExit(e *state.Exit) string {
	if e.Signal != "" {
		return fmt.Sprintf("killed by %s (exit status %d)", e.Signal, e.Code)
	}
	return fmt.Sprintf("exit status %d", e.Code)
}

func signalName(s syscall.Signal) string {
	if name := unix.SignalName(s); name != "" {
		return name
	}
	return fmt.Sprintf("signal %d", int(s))
}

// stderrWriter avoids handing the runner a typed nil, which it would take
// for a writer.
func stderrWriter(f *os.File) io.Writer {
	if f == nil {
		return nil
	}
	return f
}
