package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/alecthomas/kong"
	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/metrics"
	"github.com/whimbrel/whimbrel/state"
)

// HereFlags configure a run of a workflow on this machine: `whimbrel run`,
// and `whimbrel start`/`rerun` on the embedded store. Such a run
// supervises its activities inline by default: its Ctrl-C stops them
// anyway, so they lose nothing by living in its process.
type HereFlags struct {
	Wrapper   string `name:"wrapper" type:"path" help:"The whimbrel-run binary (default: beside this binary, else on PATH). --supervise process needs it; inline needs it only for an activity that asks for WHIMBREL_API=simple, which fails without it."`
	Supervise string `name:"supervise" env:"WHIMBREL_SUPERVISE" enum:"inline,process" default:"inline" help:"How the activities are supervised. inline (the default): in this process, which starts only each command (less CPU per activity, a quicker hop); they live and die with this run, whose Ctrl-C stops them anyway. process: a whimbrel-run process each. The flag wins over WHIMBREL_SUPERVISE. See docs/launcher.md."`
	LogDir    string `name:"log-dir" type:"path" help:"Where each activity's output goes (default: logs/ beside the embedded store, else .whimbrel/logs)."`
	JSON      bool   `name:"json" help:"Print one JSON object per event (each change of state, each note) instead of the view for people."`
	// MaxRunning is Airflow's parallelism: it keeps a run of many
	// activities from starting more processes than the machine holds.
	MaxRunning int    `name:"max-running" default:"${default_max_running}" help:"Run at most this many activities at once (0: no cap); the next starts as soon as one ends."`
	WebURL     string `name:"web-url" env:"WHIMBREL_WEB_URL" help:"The web view's base URL: the run's notifications (notify:) link to its page there."`
}

// defaultMaxRunning is --max-running's default: no cap, every activity that
// is ready starts (Airflow's parallelism, 32 by default, is the same
// setting).
const defaultMaxRunning = 0

// here is what a run on this machine needs besides the definition.
type here struct {
	HereFlags
	choice cli.Choice
	prefix string
	log    hclog.Logger
	// started, if set, is told the execution's ID once it has started.
	started func(workflowExecID string)
	// params are the execution's parameters, when run starts it here.
	params map[string]string
	// metrics, if not nil, serves what the run's launcher and monitor
	// see (whimbrel run --metrics-addr).
	metrics *metrics.Server
}

// logDir is where the activities' output goes: beside the embedded store
// (so a run from a sub-folder finds the project's logs), else in
// .whimbrel/logs.
func (h here) logDir() (string, error) {
	dir := h.LogDir
	if dir == "" {
		dir = filepath.FromSlash(".whimbrel/logs")
		if p, ok := strings.CutPrefix(h.choice.Store, "sqlite:"); ok {
			dir = filepath.Join(filepath.Dir(p), "logs")
		}
	}
	return filepath.Abs(dir)
}

// storeEnv lets the wrappers reach the same store.
func (h here) storeEnv() map[string]string {
	return map[string]string{"WHIMBREL_STORE": h.choice.Store, "WHIMBREL_TABLE_PREFIX": h.prefix}
}

// settled maps how a run here ended to the exit code.
func settled(wf *state.WorkflowExec) error {
	if wf == nil || wf.State != state.WorkflowCompleted || wf.FinallyFailed != "" {
		return &cli.ExitError{Code: cli.ExitFailure}
	}
	return nil
}

// checkLocal refuses a definition with activities a run here cannot
// launch, before anything is written.
func checkLocal(d *definition.Workflow) error {
	for _, name := range d.Names() {
		if t := d.Effective(name).Launch.Type; t != definition.LaunchLocal {
			return fmt.Errorf("activity %q is launched by %s: a run on this machine (the embedded store) starts local activities only; use --store dynamodb with a whimbrel-launcher that serves %s, or --detach and such a launcher on this store", name, t, t)
		}
	}
	return nil
}

// run runs the execution start starts (nil: a fresh one of d) to its end
// on this machine; see runHere for how, and where it can.
func (h here) run(ctx context.Context, k *kong.Context, st state.Store, d *definition.Workflow, start func(context.Context) (string, error)) error {
	if err := checkLocal(d); err != nil {
		return err
	}
	return runHere(ctx, k, h, st, d, start)
}
