package local

import (
	"context"
	"os"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/definition"
	locallauncher "github.com/whimbrel/whimbrel/launcher/local"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// follower follows one run from its start to its end: it reads the
// workflow from the store at every poll and hands what changed to the
// watcher (which emits events for a view), and on interrupts cancels the
// workflow and stops the crew, harder at each one.
type follower struct {
	st        Store
	d         *definition.Workflow
	id        string
	c         *crew
	w         *watcher
	log       hclog.Logger
	interrupt <-chan os.Signal
}

// follow returns once the workflow and all its activities are terminal
// (and, after an interrupt, every process it started has exited), or at
// the third interrupt, or when ctx ends.
func (f *follower) follow(ctx context.Context) (*Result, error) {
	st, id, w, backend := f.st, f.id, f.w, f.c.backend
	warn := &limiter{every: warnEvery}
	res := &Result{WorkflowExecID: id}
	var p poller
	var force <-chan time.Time // after an interrupt: when to insist
	for {
		wf, acts, err := p.poll(ctx, st, id)
		if err == nil {
			w.observe(wf, acts)
			if wf.State.Terminal() && allTerminal(acts) && (!res.Interrupted || backend.Running() == 0) {
				res.Workflow, res.Activities = wf, acts
				break
			}
		} else if n, ok := warn.allow(time.Now()); ok {
			// A store outage fails every poll: say so now and then, not
			// four times a second.
			f.log.Warn("reading the workflow failed", "error", err, "failures_since_last_warning", n)
		}
		t := time.NewTimer(pollInterval)
		escalate := false
		select {
		case <-ctx.Done():
			// The caller gives up on the run: nothing this run started
			// may outlive it, the wrappers (and the goroutines waiting
			// for them) included.
			f.c.stop()
			stopWrappers(backend, maxKillGrace(f.d)+wrapperMargin)
			return res, ctx.Err()
		case <-f.interrupt:
			escalate = true
		case <-force:
			escalate = true
		case <-t.C:
		}
		t.Stop()
		if !escalate {
			continue
		}
		res.interrupts++
		switch res.interrupts {
		case 1:
			res.Interrupted = true
			w.note("interrupted: cancelling the workflow and stopping its activities (again to force)…")
			if _, err := workflow.Cancel(ctx, st, id, "interrupted (whimbrel run)", f.log); err != nil {
				f.log.Warn("cancelling the workflow failed", "error", err)
			}
			// Nothing new starts but the finally activities, which run
			// once the cancellation is recorded; the monitor goes on
			// finishing what the cancellation leaves.
			if len(f.d.Finally) == 0 {
				f.c.stopLauncher()
			}
			backend.Signal(syscall.SIGTERM)
			force = time.After(maxKillGrace(f.d) + wrapperMargin)
		case 2:
			w.note("forcing: the activities' commands are killed (again to quit at once)")
			backend.Signal(syscall.SIGTERM) // a wrapper's second signal kills its command
			force = nil
		default:
			w.note("quitting: killing what is left of the activities (their wrappers, under --supervise process)")
			// With the store slow or down, the activities supervised
			// inline could retry their final writes for minutes: what
			// they have not recorded within a short bound is left to
			// the monitor, as a killed wrapper's is.
			if !backend.Quit(locallauncher.QuitRecordWait) {
				w.note("quitting without recording the end of every activity: a monitor times them out")
			}
			f.c.stop()
			rctx, cancel := context.WithTimeout(ctx, locallauncher.QuitRecordWait) // a store that does not answer must not hold the quit
			res.Workflow, res.Activities, _ = read(rctx, st, id)
			cancel()
			w.ended(res)
			return res, nil
		}
	}
	f.c.stop()
	backend.Wait()
	w.ended(res)
	return res, nil
}

// stopWrappers stops the wrappers b started and waits for them: SIGTERM,
// which each relays to its command and records, then SIGKILL to those
// still running after within.
func stopWrappers(b *locallauncher.Backend, within time.Duration) {
	b.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Wait()
	}()
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	b.Signal(syscall.SIGKILL)
	<-done
}

// maxKillGrace is the longest a wrapper of d may wait for its command.
func maxKillGrace(d *definition.Workflow) time.Duration {
	longest := time.Duration(0)
	for _, n := range d.Names() {
		g := time.Duration(d.Effective(n).KillGrace)
		if g == 0 {
			g = state.DefaultKillGrace
		}
		longest = max(longest, g)
	}
	return longest
}

func read(ctx context.Context, st workflow.Reader, id string) (*state.WorkflowExec, []*state.ActivityExec, error) {
	wf, err := st.GetWorkflow(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	acts, err := st.Activities(ctx, id)
	_, err = state.Skipped(err) // reported by the store; the progress shows the rest
	return wf, acts, err
}

func allTerminal(acts []*state.ActivityExec) bool {
	for _, a := range acts {
		if !a.State.Terminal() {
			return false
		}
	}
	return true
}

// poller reads the workflow at every poll, and its activities only as
// often as their cost allows, and at every poll once the workflow has
// settled: a read of every activity costs in proportion to how many there
// are, and for a workflow of thousands every 250 ms would spend a core on
// its progress (and its store on the reads) while it runs. Its end is
// seen at once all the same.
type poller struct {
	acts []*state.ActivityExec
	next time.Time // the next read of the activities
}

func (p *poller) poll(ctx context.Context, st workflow.Reader, id string) (*state.WorkflowExec, []*state.ActivityExec, error) {
	wf, err := st.GetWorkflow(ctx, id)
	if err != nil || (!wf.State.Terminal() && time.Now().Before(p.next) && p.acts != nil) {
		return wf, p.acts, err
	}
	began := time.Now()
	acts, err := st.Activities(ctx, id)
	_, err = state.Skipped(err) // reported by the store; the progress shows the rest
	if err != nil {
		return nil, nil, err
	}
	p.acts, p.next = acts, time.Now().Add(pollCost*time.Since(began))
	return wf, acts, nil
}
