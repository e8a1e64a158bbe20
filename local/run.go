// Package local runs one workflow to its end on this machine, as
// `whimbrel run` does: it starts the workflow, launches its activities as
// local processes under whimbrel-run, monitors their heartbeats, shows the
// progress, and on interrupt cancels the workflow and stops every process
// it started.
package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/internal/nudge"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/monitor"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
	"github.com/whimbrel/whimbrel/wrapper"
)

// Timings of a local run.
const (
	pollInterval = 250 * time.Millisecond // progress: the workflow item
	// pollCost spaces the reads of every activity: no more often than
	// every pollCost reads' time.
	pollCost        = 20
	launchInterval  = time.Second // the launcher's poll; nudges make it sooner
	monitorInterval = 2 * time.Second
	// advanceGrace is how long the monitor leaves the advance after an
	// activity to its wrapper before finishing it itself: readying a
	// fan-out of thousands takes seconds.
	advanceGrace = 20 * time.Second
)

// Options configure Run.
type Options struct {
	Wrapper string // the whimbrel-run binary
	// StoreEnv lets the wrappers reach the same store.
	StoreEnv map[string]string
	// LogDir receives each activity's output, one file per activity.
	LogDir string
	// Events receives what happens, in order, from Run's own goroutine: a
	// view renders them (Run draws nothing itself). Nil drops them.
	Events func(Event)
	// Interrupt, when it delivers, cancels the workflow.
	Interrupt <-chan os.Signal
	Logger    hclog.Logger
	// Start starts the execution Run runs and returns its ID; the default
	// starts the definition anew (as `whimbrel run`). `whimbrel start` and
	// `whimbrel rerun` on the embedded store give their own.
	Start func(ctx context.Context) (string, error)
	// Started, if set, is told the execution's ID once it has started
	// (whimbrel run --web prints the web view's address with it).
	Started func(workflowExecID string)
	// Params are the execution's parameters (see workflow.Definition.Bind).
	Params map[string]string
}

// Result is how the run ended.
type Result struct {
	WorkflowExecID string
	Workflow       *state.WorkflowExec
	Activities     []*state.ActivityExec
	Interrupted    bool
	interrupts     int
}

// Run starts d and runs it to its end. It returns an error only when it
// could not run the workflow; a workflow that failed is a Result.
func Run(ctx context.Context, st state.Store, d *workflow.Definition, opts Options) (*Result, error) {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	for _, name := range d.Names() {
		if t := d.Effective(name).Launch.Type; t != workflow.LaunchLocal {
			return nil, fmt.Errorf("activity %q is launched by %s: a run on this machine starts local activities only; use a store a whimbrel-launcher that serves %s watches (such as --store dynamodb) with whimbrel start", name, t, t)
		}
	}
	nl, err := nudge.Listen()
	if err != nil {
		return nil, err
	}
	defer nl.Close()

	start := opts.Start
	if start == nil {
		start = func(ctx context.Context) (string, error) {
			id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{Source: "whimbrel run", Params: opts.Params})
			return id, err
		}
	}
	id, err := start(ctx)
	if err != nil {
		return nil, err
	}
	if opts.Started != nil {
		opts.Started(id)
	}
	logDir := filepath.Join(opts.LogDir, strings.ReplaceAll(id, "::", "-"))
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, fmt.Errorf("create the log folder: %w", err)
	}
	backend := &launcher.Local{Wrapper: opts.Wrapper, LogDir: logDir, Logger: opts.Logger.Named("local"),
		Env: append(os.Environ(), nudge.Env+"="+nl.Addr())}
	// Both serve this workflow only: others in the same store are
	// someone else's.
	l := launcher.New(st, launcher.Config{
		Backends: map[string]launcher.Backend{workflow.LaunchLocal: backend},
		Interval: launchInterval, Nudge: nl.C(), StoreEnv: opts.StoreEnv, Logger: opts.Logger.Named("launcher"),
		Workflow: id,
	})
	backend.Exited = func(j launcher.Job, status string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		l.Exited(ctx, j, status)
	}
	m := monitor.New(st, monitor.Config{Interval: monitorInterval, Skew: monitor.DefaultSkew, AdvanceGrace: advanceGrace, SweepCost: 10,
		Logger: opts.Logger.Named("monitor"), Workflow: id})

	// The launcher and the monitor run until the workflow settles (the
	// launcher stops earlier on an interrupt); this function owns them and
	// waits for them.
	launchCtx, stopLaunching := context.WithCancel(ctx)
	monitorCtx, stopMonitoring := context.WithCancel(ctx)
	var launching, monitoring sync.WaitGroup
	launching.Add(1)
	go func() {
		defer launching.Done()
		_ = l.Run(launchCtx)
	}()
	monitoring.Add(1)
	go func() {
		defer monitoring.Done()
		_ = m.Run(monitorCtx)
	}()
	stopLauncher := func() {
		stopLaunching()
		launching.Wait()
	}
	stop := func() {
		stopLauncher()
		stopMonitoring()
		monitoring.Wait()
	}

	emit := opts.Events
	if emit == nil {
		emit = func(Event) {}
	}
	w := &watcher{emit: emit, id: id, logDir: logDir, last: map[string]state.ActivityState{}}
	emit(Event{Time: time.Now(), Kind: EventStarted, WorkflowExecID: id, LogDir: logDir})
	warn := &limiter{every: warnEvery}
	res := &Result{WorkflowExecID: id}
	var force <-chan time.Time // after an interrupt: when to insist
	var p poller
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
			opts.Logger.Warn("reading the workflow failed", "error", err, "failures_since_last_warning", n)
		}
		t := time.NewTimer(pollInterval)
		escalate := false
		select {
		case <-ctx.Done():
			stop()
			return res, ctx.Err()
		case <-opts.Interrupt:
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
			if _, err := workflow.Cancel(ctx, st, id, "interrupted (whimbrel run)", opts.Logger); err != nil {
				opts.Logger.Warn("cancelling the workflow failed", "error", err)
			}
			// Nothing new starts; the monitor goes on finishing what the
			// cancellation leaves.
			stopLauncher()
			backend.Signal(syscall.SIGTERM)
			force = time.After(maxKillGrace(d) + 15*time.Second)
		case 2:
			w.note("forcing: the activities' commands are killed (again to quit at once)")
			backend.Signal(syscall.SIGTERM) // a wrapper's second signal kills its command
			force = nil
		default:
			w.note("quitting: killing the activities' wrappers")
			backend.Signal(syscall.SIGKILL)
			stop()
			backend.Wait()
			res.Workflow, res.Activities, _ = read(ctx, st, id)
			w.ended(res)
			return res, nil
		}
	}
	stop()
	backend.Wait()
	w.ended(res)
	return res, nil
}

// maxKillGrace is the longest a wrapper of d may wait for its command.
func maxKillGrace(d *workflow.Definition) time.Duration {
	longest := time.Duration(0)
	for _, n := range d.Names() {
		g := time.Duration(d.Effective(n).KillGrace)
		if g == 0 {
			g = wrapper.DefaultKillGrace
		}
		longest = max(longest, g)
	}
	return longest
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

func (p *poller) poll(ctx context.Context, st state.Store, id string) (*state.WorkflowExec, []*state.ActivityExec, error) {
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

func read(ctx context.Context, st state.Store, id string) (*state.WorkflowExec, []*state.ActivityExec, error) {
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
