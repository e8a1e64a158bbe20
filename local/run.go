// Package local runs one workflow to its end on this machine, as
// `whimbrel run` does: it starts the workflow, launches its activities as
// local processes (each supervised in this process or under whimbrel-run,
// as Options.Supervise says), monitors their heartbeats, reports
// what happens as Events (package local/view shows them; this package
// draws nothing), and on interrupt cancels the workflow and stops every
// process it started.
//
// Run wires a crew (a launcher and a monitor that serve this workflow
// only, run.go) and a follower that polls the workflow, turns what changed
// into events and escalates interrupts (follow.go, events.go).
package local

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/nudge"
	"github.com/whimbrel/whimbrel/launcher"
	locallauncher "github.com/whimbrel/whimbrel/launcher/local"
	"github.com/whimbrel/whimbrel/monitor"
	"github.com/whimbrel/whimbrel/notify"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// Timings of a local run.
const (
	pollInterval = 250 * time.Millisecond // progress: the workflow item
	// pollCost spaces the reads of every activity: no more often than
	// every pollCost reads' time.
	pollCost        = 20
	launchInterval  = time.Second // the launcher's poll; nudges make it sooner
	monitorInterval = 2 * time.Second
	// wrapperMargin is how much longer than its kill grace a stopped
	// wrapper is given to record its command's outcome before it is
	// insisted on.
	wrapperMargin = 15 * time.Second
	// advanceGrace is how long the monitor leaves the advance after an
	// activity to its wrapper before finishing it itself: readying a
	// fan-out of thousands takes seconds.
	advanceGrace = 20 * time.Second
)

// Options configure Run.
type Options struct {
	Wrapper string // the whimbrel-run binary
	// Supervise is how each activity is supervised (see
	// locallauncher.Backend.Supervise; default: a whimbrel-run process).
	Supervise string
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
	// Params are the execution's parameters (see definition.Workflow.Bind).
	Params map[string]string
	// MaxRunning caps the activities running at once (0: no cap); the
	// next starts as soon as one ends.
	MaxRunning int
	// LaunchObserver and MonitorObserver, when set, are told what the run's
	// launcher and monitor do (whimbrel run --metrics-addr).
	LaunchObserver  launcher.Observer
	MonitorObserver monitor.Observer
	// NotifyObserver is told what the run's deliverer of notifications
	// does; WebURL, when set, links each notification to the web view.
	NotifyObserver notify.Observer
	WebURL         string
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
func Run(ctx context.Context, st Store, d *definition.Workflow, opts Options) (*Result, error) {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	for _, name := range d.Names() {
		if t := d.Effective(name).Launch.Type; t != definition.LaunchLocal {
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
			id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{Source: "whimbrel run", Params: opts.Params, LaunchedHere: true})
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
	logDir := filepath.Join(opts.LogDir, locallauncher.LogFolder(id))
	// The logs are what the commands printed: their user's alone.
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		return nil, fmt.Errorf("create the log folder: %w", err)
	}
	c := startCrew(ctx, st, id, logDir, nl, opts)
	emit := opts.Events
	if emit == nil {
		emit = func(Event) {}
	}
	f := &follower{st: st, d: d, id: id, c: c, log: opts.Logger, interrupt: opts.Interrupt,
		w: &watcher{emit: emit, id: id, logDir: logDir, last: map[string]state.ActivityState{}, finally: d.Finally}}
	emit(Event{Time: time.Now(), Kind: EventStarted, WorkflowExecID: id, LogDir: logDir})
	if wf, err := st.GetWorkflow(ctx, id); err == nil {
		if why := workflow.RunWaitReason(ctx, st, wf); why != "" {
			// max_active_runs: the run starts when a run of its workflow ends.
			emit(Event{Time: time.Now(), Kind: EventNote, WorkflowExecID: id, Message: "the run waits to start: " + why})
		}
	}
	return f.follow(ctx)
}

// crew is the launcher and the monitor of one run: both serve this
// workflow only (others in the same store are someone else's). They run
// until the workflow settles (the launcher stops earlier on an
// interrupt); the crew owns their goroutines and waits for them.
type crew struct {
	backend               *locallauncher.Backend
	stopLaunching         context.CancelFunc
	stopMonitoring        context.CancelFunc
	launching, monitoring sync.WaitGroup
	// The run's deliverer of notifications (notify.go).
	deliverer      *notify.Deliverer
	stopDelivering context.CancelFunc
	delivering     sync.WaitGroup
}

func startCrew(ctx context.Context, st Store, id, logDir string, nl *nudge.Listener, opts Options) *crew {
	backend := &locallauncher.Backend{Wrapper: opts.Wrapper, LogDir: logDir, Logger: opts.Logger.Named("local"), Supervise: opts.Supervise}
	l := locallauncher.NewLauncher(st, launcher.Config{
		Interval: launchInterval, MaxRunning: opts.MaxRunning, StoreEnv: opts.StoreEnv, Logger: opts.Logger.Named("launcher"), Workflow: id,
		Observer: opts.LaunchObserver,
	}, backend, nl)
	m := monitor.New(st, monitor.Config{Interval: monitorInterval, Skew: monitor.DefaultSkew, AdvanceGrace: advanceGrace, SweepCost: 10,
		Logger: opts.Logger.Named("monitor"), Workflow: id, Observer: opts.MonitorObserver})
	c := &crew{backend: backend}
	var launchCtx, monitorCtx context.Context
	launchCtx, c.stopLaunching = context.WithCancel(ctx)
	monitorCtx, c.stopMonitoring = context.WithCancel(ctx)
	c.launching.Add(1)
	go func() {
		defer c.launching.Done()
		_ = l.Run(launchCtx)
	}()
	c.monitoring.Add(1)
	go func() {
		defer c.monitoring.Done()
		_ = m.Run(monitorCtx)
	}()
	c.startDelivering(ctx, st, id, opts)
	return c
}

// stopLauncher stops launching and waits for the launcher to return.
func (c *crew) stopLauncher() {
	c.stopLaunching()
	c.launching.Wait()
}

// stop stops the launcher and the monitor and waits for both, then the
// deliverer after its last delivery.
func (c *crew) stop() {
	c.stopLauncher()
	c.stopMonitoring()
	c.monitoring.Wait()
	c.stopDeliverer(context.Background())
}

// Interrupts delivers Ctrl-C, SIGTERM and SIGHUP (for Options.Interrupt)
// until stop is called.
func Interrupts() (c <-chan os.Signal, stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	return ch, func() { signal.Stop(ch) }
}
