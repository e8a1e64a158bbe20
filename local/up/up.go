// Package up serves an embedded store on this machine until it is told to
// stop, as `whimbrel up` does: a launcher that starts the store's local
// activities (each supervised in this process or under whimbrel-run, as
// Options.Supervise says; their output in a log folder), a monitor
// that watches their heartbeats and fires the store's schedules, and the
// web view, and a loop that starts the Simple Lambda API's pending
// requests. Whatever starts a workflow on that store then finds it run:
// `whimbrel start --detach`, `whimbrel request`, a schedule, the web
// view's rerun.
//
// A lock file beside the store (Acquire, Running) says that a server runs,
// so that a second one refuses to start and `whimbrel start --detach` can
// say whether anything will run what it starts.
//
// On the first interrupt Serve stops starting anything, cancels the
// workflows whose activities it is running (as `whimbrel run` does with
// its own) and waits for their wrappers to record how their commands
// ended; a second interrupt kills the commands, a third the wrappers. It
// returns once every process and goroutine it started has ended.
package up

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/internal/nudge"
	"github.com/whimbrel/whimbrel/launcher"
	locallauncher "github.com/whimbrel/whimbrel/launcher/local"
	"github.com/whimbrel/whimbrel/monitor"
	"github.com/whimbrel/whimbrel/notify"
	"github.com/whimbrel/whimbrel/schedule"
	"github.com/whimbrel/whimbrel/simpleapi"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/web"
	"github.com/whimbrel/whimbrel/workflow"
)

// Timings of a server.
const (
	// monitorInterval is short, as whimbrel run's: the monitor is the
	// only one, and a sweep of an embedded store is cheap.
	monitorInterval = 2 * time.Second
	// scheduleInterval is how often the schedules are looked at: a fire
	// starts within this of its time.
	scheduleInterval = time.Second
	// advanceGrace is how long the monitor leaves the advance after an
	// activity to its wrapper before finishing it itself.
	advanceGrace = 20 * time.Second
	// wrapperMargin is how much longer than its kill grace a stopped
	// wrapper is given to record its command's outcome before it is
	// insisted on.
	wrapperMargin = 15 * time.Second
	// stopTimeout bounds each store call made while stopping.
	stopTimeout = 30 * time.Second
)

// processorName is the name of the processor that starts the requests: a
// workflow registered with another Lambda function's name is left to it.
const processorName = "whimbrel-up"

// Store is what a server needs of the store: what its launcher, monitor,
// scheduler and web view each read and write.
type Store interface {
	launcher.Store
	monitor.Store
	schedule.Store
	web.Store
	workflow.Canceller
}

// Options configure Serve.
type Options struct {
	// Wrapper is the whimbrel-run binary.
	Wrapper string
	// Supervise is how each activity is supervised (see
	// locallauncher.Backend.Supervise).
	Supervise string
	// StoreEnv lets the wrappers reach the same store.
	StoreEnv map[string]string
	// LogDir receives each activity's output: a folder per execution, a
	// file per activity, as whimbrel run lays them out.
	LogDir string
	// MaxRunning caps the activities running at once (0: no cap).
	MaxRunning int
	// Web is where the web view listens; WebToken is its token (at least
	// web.MinTokenLength characters) and AllowActions lets its pages
	// cancel and rerun.
	Web          net.Listener
	WebToken     string
	AllowActions bool
	// Interrupt delivers the requests to stop (Ctrl-C): the first stops
	// gracefully, the second kills the activities' commands, the third
	// their wrappers.
	Interrupt <-chan os.Signal
	// Notes receives what a person at the terminal should read while the
	// server stops; nil drops it.
	Notes  io.Writer
	Logger hclog.Logger
	// Requests, when set, is the store's Simple Lambda API: its pending
	// requests are started here (see ServeRequests).
	Requests Requests
}

// Serve serves st until ctx ends or Interrupt delivers, then stops as the
// package says. It returns an error only when it could not serve.
func Serve(ctx context.Context, st Store, opts Options) error {
	log := opts.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if opts.Notes == nil {
		opts.Notes = io.Discard
	}
	view, err := web.New(web.Options{Store: st, Token: opts.WebToken, AllowActions: opts.AllowActions, Logger: log.Named("web")})
	if err != nil {
		opts.Web.Close()
		return err
	}
	nl, err := nudge.Listen()
	if err != nil {
		view.Close()
		opts.Web.Close()
		return err
	}
	defer nl.Close()
	backend := &locallauncher.Backend{Wrapper: opts.Wrapper, LogDir: opts.LogDir, ByWorkflow: true, Logger: log.Named("local"), Supervise: opts.Supervise}
	l := locallauncher.NewLauncher(st, launcher.Config{
		MaxRunning: opts.MaxRunning, StoreEnv: opts.StoreEnv, Logger: log.Named("launcher"),
	}, backend, nl)
	m := monitor.New(st, monitor.Config{Interval: monitorInterval, Skew: monitor.DefaultSkew, AdvanceGrace: advanceGrace,
		Logger: log.Named("monitor")})

	var g group
	stopWeb := g.start(func(ctx context.Context) { _ = view.Serve(ctx, opts.Web) })
	stopMonitor := g.start(func(ctx context.Context) { _ = m.Run(ctx) })
	// The monitor's deliverer of notifications, as every monitor has
	// (docs/notifications.md): stopped with the monitor.
	if ns, ok := st.(notify.Store); ok {
		d := notify.New(ns, notify.Config{Interval: monitorInterval, Logger: log.Named("notify")})
		stopMonitor = both(stopMonitor, g.start(func(ctx context.Context) { _ = d.Run(ctx) }))
	}
	stopSchedules := g.start(func(ctx context.Context) { _ = schedule.Run(ctx, st, scheduleInterval, log.Named("schedule"), nil) })
	stopLauncher := g.start(func(ctx context.Context) { _ = l.Run(ctx) })
	stopRequests := func() {}
	if opts.Requests != nil {
		p := simpleapi.New(simpleapi.Config{Store: opts.Requests, Name: processorName, OrderWindow: simpleapi.DefaultOrderWindow, Logger: log.Named("requests")})
		stopRequests = g.start(func(ctx context.Context) { ServeRequests(ctx, opts.Requests, p, log.Named("requests")) })
	}
	defer g.wait()

	select {
	case <-ctx.Done():
	case <-opts.Interrupt:
	}
	// Nothing new starts from here on.
	stopSchedules()
	stopRequests()
	stopLauncher()
	jobs := backend.Jobs()
	if len(jobs) > 0 {
		fmt.Fprintf(opts.Notes, "stopping: cancelling the workflows of the %d running activities and waiting for them to stop (Ctrl-C again to force)…\n", len(jobs))
	}
	cancelWorkflows(st, jobs, log)
	backend.Signal(syscall.SIGTERM)
	stopped := make(chan struct{})
	go func() { // owned: ends once every wrapper has exited, which the escalation below forces
		defer close(stopped)
		backend.Wait()
	}()
	force := time.NewTimer(longestGrace(jobs) + wrapperMargin)
	defer force.Stop()
	sweepWithin := stopTimeout
	for forced := 0; ; {
		select {
		case <-stopped:
			forced = -1
		case <-opts.Interrupt:
			forced++
		case <-force.C:
			forced++
		}
		if forced < 0 {
			break
		}
		if forced == 1 {
			fmt.Fprintln(opts.Notes, "forcing: the activities' commands are killed (Ctrl-C again to quit at once)")
			backend.Signal(syscall.SIGTERM) // a wrapper's second signal kills its command
			force.Reset(wrapperMargin)
			continue
		}
		fmt.Fprintln(opts.Notes, "quitting: killing what is left of the activities (their wrappers, under --supervise process)")
		// With the store slow or down, the activities supervised inline
		// could retry their final writes for minutes: what they have
		// not recorded within a short bound is left to the next
		// whimbrel up's monitor, as a killed wrapper's is.
		if !backend.Quit(locallauncher.QuitRecordWait) {
			fmt.Fprintln(opts.Notes, "quitting without recording the end of every activity: the next whimbrel up's monitor times them out")
		}
		sweepWithin = locallauncher.QuitRecordWait // quitting at once: the sweep too is cut short
		break
	}
	// A last sweep settles what the wrappers' ends left to settle.
	sctx, cancel := context.WithTimeout(context.Background(), sweepWithin)
	if _, err := m.Sweep(sctx); err != nil {
		log.Warn("the last sweep failed; the next whimbrel up finishes it", "error", err)
	}
	cancel()
	stopMonitor()
	stopWeb()
	return nil
}

// cancelWorkflows cancels the workflows of the activities jobs run, once
// each: their commands are about to be stopped, and a run stopped half way
// reads as cancelled, with why, rather than as a failure of its command.
func cancelWorkflows(st workflow.Canceller, jobs []launcher.Job, log hclog.Logger) {
	seen := map[string]bool{}
	var ids []string
	for _, j := range jobs {
		if !seen[j.Key.WorkflowExecID] {
			seen[j.Key.WorkflowExecID] = true
			ids = append(ids, j.Key.WorkflowExecID)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		if _, err := workflow.Cancel(ctx, st, id, "interrupted: whimbrel up was stopped", log); err != nil {
			log.Warn("cancelling a workflow failed", "workflow_exec_id", id, "error", err)
		}
		cancel()
	}
}

// longestGrace is the longest kill grace of the activities jobs run.
func longestGrace(jobs []launcher.Job) time.Duration {
	longest := state.DefaultKillGrace
	for _, j := range jobs {
		longest = max(longest, time.Duration(j.Settings.KillGrace))
	}
	return longest
}

// group owns the server's goroutines: each runs until the function start
// returns is called, which waits for it to end; wait stops and waits for
// those not stopped yet.
type group struct {
	mu    sync.Mutex
	stops []func()
}

func (g *group) start(run func(context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	g.mu.Lock()
	g.stops = append(g.stops, stop)
	g.mu.Unlock()
	return stop
}

func (g *group) wait() {
	g.mu.Lock()
	stops := g.stops
	g.mu.Unlock()
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i]()
	}
}

// both calls a, then b.
func both(a, b func()) func() { return func() { a(); b() } }
