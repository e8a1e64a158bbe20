// Package local runs one workflow to its end on this machine, as
// `whimbrel run` does: it starts the workflow, launches its activities as
// local processes under whimbrel-run, monitors their heartbeats, shows the
// progress, and on interrupt cancels the workflow and stops every process
// it started.
package local

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/activity"
	"github.com/whimbrel/whimbrel/internal/nudge"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/monitor"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// Timings of a local run.
const (
	pollInterval    = 250 * time.Millisecond // progress
	launchInterval  = time.Second            // the launcher's poll; nudges make it sooner
	monitorInterval = 2 * time.Second
)

// Options configure Run.
type Options struct {
	Wrapper string // the whimbrel-run binary
	// StoreEnv lets the wrappers reach the same store.
	StoreEnv map[string]string
	// LogDir receives each activity's output, one file per activity.
	LogDir string
	// Out receives the progress; TTY redraws a table in place, otherwise
	// one line is printed per change.
	Out io.Writer
	TTY bool
	// Width is the terminal's width; rows are cut to it (0: not cut).
	Width int
	// Interrupt, when it delivers, cancels the workflow.
	Interrupt <-chan os.Signal
	Logger    hclog.Logger
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
			return nil, fmt.Errorf("activity %q is launched by %s: whimbrel run starts local activities only; use whimbrel start with a whimbrel-launcher that serves %s", name, t, t)
		}
	}
	nl, err := nudge.Listen()
	if err != nil {
		return nil, err
	}
	defer nl.Close()

	id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{Source: "whimbrel run", Params: opts.Params})
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
	m := monitor.New(st, monitor.Config{Interval: monitorInterval, Skew: monitor.DefaultSkew,
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

	p := newProgress(opts.Out, opts.TTY, opts.Width, d, id, logDir)
	res := &Result{WorkflowExecID: id}
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	var force <-chan time.Time // after an interrupt: when to insist
	for {
		wf, acts, err := read(ctx, st, id)
		if err == nil {
			p.show(wf, acts)
			if wf.State.Terminal() && allTerminal(acts) && (!res.Interrupted || backend.Running() == 0) {
				res.Workflow, res.Activities = wf, acts
				break
			}
		} else {
			opts.Logger.Warn("reading the workflow failed", "error", err)
		}
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
		if !escalate {
			continue
		}
		res.interrupts++
		switch res.interrupts {
		case 1:
			res.Interrupted = true
			p.note("interrupted: cancelling the workflow and stopping its activities (again to force)…")
			if _, err := workflow.Cancel(ctx, st, id, "interrupted (whimbrel run)", opts.Logger); err != nil {
				opts.Logger.Warn("cancelling the workflow failed", "error", err)
			}
			// Nothing new starts; the monitor goes on finishing what the
			// cancellation leaves.
			stopLauncher()
			backend.Signal(syscall.SIGTERM)
			force = time.After(maxKillGrace(d) + 15*time.Second)
		case 2:
			p.note("forcing: the activities' commands are killed (again to quit at once)")
			backend.Signal(syscall.SIGTERM) // a wrapper's second signal kills its command
			force = nil
		default:
			p.note("quitting: killing the activities' wrappers")
			backend.Signal(syscall.SIGKILL)
			stop()
			backend.Wait()
			res.Workflow, res.Activities, _ = read(ctx, st, id)
			return res, nil
		}
	}
	stop()
	backend.Wait()
	p.done(res)
	return res, nil
}

// maxKillGrace is the longest a wrapper of d may wait for its command.
func maxKillGrace(d *workflow.Definition) time.Duration {
	longest := time.Duration(0)
	for _, n := range d.Names() {
		g := time.Duration(d.Effective(n).KillGrace)
		if g == 0 {
			g = activity.DefaultKillGrace
		}
		longest = max(longest, g)
	}
	return longest
}

func read(ctx context.Context, st state.Store, id string) (*state.WorkflowExec, []*state.ActivityExec, error) {
	wf, err := st.GetWorkflow(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	acts, err := st.Activities(ctx, id)
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

// progress shows the run.
type progress struct {
	out    io.Writer
	tty    bool
	width  int
	order  []string // activity names, dependencies first
	id     string
	logDir string
	start  time.Time
	last   map[string]state.ActivityState
	lines  int // lines drawn last time, on a terminal
}

func newProgress(out io.Writer, tty bool, width int, d *workflow.Definition, id, logDir string) *progress {
	fmt.Fprintf(out, "workflow %s started; logs in %s\n", id, logDir)
	return &progress{out: out, tty: tty, width: width, order: d.Names(), id: id, logDir: logDir, start: time.Now(), last: map[string]state.ActivityState{}}
}

// note prints a line outside the table; the table is drawn anew below it.
func (p *progress) note(line string) {
	fmt.Fprintln(p.out, line)
	p.lines = 0
}

// fit cuts a row to the terminal's width, so that redrawing in place
// never meets a wrapped line.
func (p *progress) fit(row string) string {
	row = strings.ReplaceAll(row, "\n", " ")
	if r := []rune(row); p.width > 1 && len(r) > p.width-1 {
		return string(r[:p.width-2]) + "…"
	}
	return row
}

func (p *progress) show(wf *state.WorkflowExec, acts []*state.ActivityExec) {
	byName := map[string]*state.ActivityExec{}
	for _, a := range acts {
		byName[a.ActivityName] = a
	}
	if !p.tty {
		for _, n := range p.order {
			a := byName[n]
			if a == nil || p.last[n] == a.State {
				continue
			}
			p.last[n] = a.State
			fmt.Fprintf(p.out, "%s %-24s %s%s\n", time.Now().Format("15:04:05"), n, a.State, detail(a))
		}
		return
	}
	if p.lines > 0 {
		fmt.Fprintf(p.out, "\x1b[%dA", p.lines)
	}
	width := 0
	for _, n := range p.order {
		width = max(width, len(n))
	}
	for _, n := range p.order {
		a := byName[n]
		if a == nil {
			continue
		}
		why := ""
		if a.State == state.Failed || a.State == state.TimedOut {
			why = detail(a)
		}
		fmt.Fprintf(p.out, "\x1b[2K%s\n", p.fit(fmt.Sprintf("  %s %-*s  %-17s %8s%s", mark(a.State), width, n, a.State, elapsed(a), why)))
	}
	fmt.Fprintf(p.out, "\x1b[2K%s\n", p.fit(fmt.Sprintf("  workflow %s %s", wf.State, time.Since(p.start).Round(100*time.Millisecond))))
	p.lines = len(acts) + 1
}

func mark(s state.ActivityState) string {
	switch s {
	case state.Completed:
		return "✓"
	case state.Running:
		return "▶"
	case state.Failed, state.TimedOut:
		return "✗"
	case state.Cancelled, state.CancelledRunning:
		return "–"
	}
	return "·"
}

func elapsed(a *state.ActivityExec) string {
	if a.StartTime.IsZero() {
		return ""
	}
	end := a.EndTime
	if end.IsZero() {
		end = time.Now()
	}
	return end.Sub(a.StartTime).Round(100 * time.Millisecond).String()
}

func detail(a *state.ActivityExec) string {
	switch {
	case a.State == state.Failed || a.State == state.TimedOut:
		if a.Reason != "" {
			return "  " + a.Reason
		}
	case a.State == state.Completed && !a.StartTime.IsZero() && !a.EndTime.IsZero():
		return "  in " + a.EndTime.Sub(a.StartTime).Round(10*time.Millisecond).String()
	}
	return ""
}

// done prints how the run ended, and why, when it did not complete.
func (p *progress) done(res *Result) {
	wf := res.Workflow
	if wf == nil {
		return
	}
	fmt.Fprintf(p.out, "workflow %s %s in %s\n", res.WorkflowExecID, wf.State, time.Since(p.start).Round(10*time.Millisecond))
	if wf.State == state.WorkflowCompleted {
		return
	}
	if wf.Reason != "" {
		fmt.Fprintf(p.out, "  why: %s\n", wf.Reason)
	}
	var failed []*state.ActivityExec
	for _, a := range res.Activities {
		if a.State == state.Failed || a.State == state.TimedOut {
			failed = append(failed, a)
		}
	}
	sort.Slice(failed, func(i, j int) bool { return failed[i].ActivityName < failed[j].ActivityName })
	for _, a := range failed {
		code := "no exit code"
		if a.ExitCode != nil {
			code = fmt.Sprintf("exit code %d", *a.ExitCode)
		}
		fmt.Fprintf(p.out, "activity %s %s (%s): %s\n", a.ActivityName, a.State, code, a.Reason)
		if tail := strings.TrimRight(a.Error, "\n"); tail != "" {
			fmt.Fprintln(p.out, "  stderr (last lines):")
			lines := strings.Split(tail, "\n")
			for _, l := range lines[max(0, len(lines)-10):] {
				fmt.Fprintln(p.out, "    "+l)
			}
		}
		fmt.Fprintf(p.out, "  full log: %s\n", filepath.Join(p.logDir, a.ActivityExecID+".log"))
	}
}
