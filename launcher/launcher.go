// Package launcher is the Activity Launcher of seed 000: it finds READY
// activities through the state index, claims each with one conditional
// write to QUEUED, starts it through a Backend (a local process, a Docker
// container, an ECS task) and records what it started. Activities that wait
// on nothing are readied by workflow.Start (or, after a crash, by the
// monitor), so REQUESTED ones need not be searched.
// Any number of launchers may run at once: the conditional write decides
// which one launches an activity, so none is launched twice.
package launcher

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// Backend starts activities of one launch type.
type Backend interface {
	// Launch starts the activity's wrapper and returns what it started: a
	// pid, a container ID, a task ARN.
	Launch(ctx context.Context, j Job) (string, error)
}

// Job is what a backend needs to start one activity.
type Job struct {
	Key          state.ActivityKey
	WorkflowName string
	ActivityName string
	Attempt      int // claims so far; with the key, it names this launch
	// Token is the launcher's claim token, the item's owner until the
	// wrapper claims it.
	Token   string
	Command []string
	// Env is the environment of the wrapper: its identity, the store, the
	// activity's settings and the definition's env.
	Env      map[string]string
	Settings workflow.Settings // with the defaults filled in
}

// Defaults of Config.
const (
	DefaultInterval = time.Second
	// launchTimeout bounds one backend call; launches in flight finish on
	// shutdown, so it also bounds the drain.
	launchTimeout = 2 * time.Minute
)

// Config configures a Launcher.
type Config struct {
	// Backends by launch type (workflow.LaunchLocal, …). Activities of a
	// type with no backend are left to other launchers.
	Backends map[string]Backend
	Interval time.Duration // between polls (default DefaultInterval)
	// MaxRunning caps the activities this launcher has started that have
	// not ended (0: no cap).
	MaxRunning int
	// Nudge, when set, wakes the poll early.
	Nudge <-chan struct{}
	// StoreEnv is passed to every wrapper so it reaches the same store
	// (WHIMBREL_STORE, WHIMBREL_TABLE_PREFIX, …).
	StoreEnv map[string]string
	// Workflow, when set, limits the launcher to that execution's
	// activities (whimbrel run's own launcher).
	Workflow string
	Logger   hclog.Logger
}

// Launcher claims and launches activities.
type Launcher struct {
	st  state.Store
	cfg Config
	log hclog.Logger

	mu      sync.Mutex
	defs    map[string]*workflow.Definition // by workflow_exec_id; definitions never change
	running map[state.ActivityKey]bool      // launched by us, not yet seen to end

	// undecodable counts the items passes skipped because they could not
	// be decoded (the store reports each one).
	undecodable atomic.Int64
}

// Undecodable is how many items the passes so far skipped because they
// could not be decoded: each is reported by the store, with its key.
func (l *Launcher) Undecodable() int64 { return l.undecodable.Load() }

// New returns a Launcher.
func New(st state.Store, cfg Config) *Launcher {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Launcher{st: st, cfg: cfg, log: cfg.Logger, defs: map[string]*workflow.Definition{},
		running: map[state.ActivityKey]bool{}}
}

// Run polls until ctx ends, then returns once the launches in flight have
// been recorded. It returns nil on a clean stop.
func (l *Launcher) Run(ctx context.Context) error {
	t := time.NewTicker(l.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := l.Once(ctx); err != nil && ctx.Err() == nil {
			l.log.Warn("poll failed; trying again at the next one", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-l.cfg.Nudge:
		}
	}
}

// Once makes one pass: it claims and launches what it finds, and returns
// how many it launched. When ctx ends it stops claiming, but a launch
// already claimed is carried out and recorded, so nothing is left QUEUED
// without a launch or a reason.
//
// It reads READY activities only: workflow.Start readies the activities
// that wait on nothing, and advances ready the rest, so activities still
// waiting never crowd the launchable ones out of a pass.
func (l *Launcher) Once(ctx context.Context) (int, error) {
	if err := l.forgetEnded(ctx); err != nil {
		return 0, err
	}
	refs, err := l.st.ActivitiesInState(ctx, state.ActivityQuery{State: state.Ready, Limit: scan})
	// One item that does not decode never stops the launches of the
	// others: the store reported it, and the pass goes on without it.
	skipped, err := state.Skipped(err)
	if err != nil {
		return 0, err
	}
	l.undecodable.Add(int64(len(skipped)))
	// Launchers that read the same index spread out over it.
	rand.Shuffle(len(refs), func(i, j int) { refs[i], refs[j] = refs[j], refs[i] })
	p := &pass{workflows: map[string]*passWorkflow{}}
	launched := 0
	for _, ref := range refs {
		if ctx.Err() != nil || l.full() {
			break
		}
		if l.cfg.Workflow != "" && ref.WorkflowExecID != l.cfg.Workflow {
			continue
		}
		ok, err := l.try(ctx, p, ref.ActivityKey)
		if errors.Is(err, state.ErrUnavailable) {
			return launched, err // the others would wait for the store the same
		}
		if errors.Is(err, state.ErrInvalidItem) {
			l.undecodable.Add(1) // the activity or its workflow; reported by the store
			continue
		}
		if err != nil {
			l.log.Warn("launch attempt failed", "activity_exec_id", ref.ActivityExecID, "error", err)
			continue
		}
		if ok {
			launched++
		}
	}
	return launched, nil
}

// scan is how many READY index entries one pass reads.
const scan = 1000

// pass remembers, for one pass, what it read of each workflow.
type pass struct {
	workflows map[string]*passWorkflow
}

type passWorkflow struct {
	state state.WorkflowState
	def   *workflow.Definition // nil: its activities cannot be launched
}

func (l *Launcher) full() bool {
	if l.cfg.MaxRunning <= 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.running) >= l.cfg.MaxRunning
}

// forgetEnded drops the activities we launched that have ended, when a cap
// makes counting them matter.
func (l *Launcher) forgetEnded(ctx context.Context) error {
	if l.cfg.MaxRunning <= 0 {
		return nil
	}
	l.mu.Lock()
	keys := make([]state.ActivityKey, 0, len(l.running))
	for k := range l.running {
		keys = append(keys, k)
	}
	l.mu.Unlock()
	for _, k := range keys {
		a, err := l.st.GetActivity(ctx, k)
		if errors.Is(err, state.ErrInvalidItem) {
			// Another client made it unreadable: whether it ended cannot
			// be told, and it must not hold a slot for ever.
			l.undecodable.Add(1)
		} else if err != nil && !errors.Is(err, state.ErrNotFound) {
			return err
		}
		if err != nil || a.State.Terminal() {
			l.mu.Lock()
			delete(l.running, k)
			l.mu.Unlock()
		}
	}
	return nil
}

// workflow reads a workflow once per pass, with its definition.
func (l *Launcher) workflow(ctx context.Context, p *pass, id string) (*passWorkflow, error) {
	if w := p.workflows[id]; w != nil {
		return w, nil
	}
	wf, err := l.st.GetWorkflow(ctx, id)
	if err != nil {
		return nil, err
	}
	w := &passWorkflow{state: wf.State}
	if wf.State == state.WorkflowRunning {
		if w.def, err = l.definition(wf); err != nil {
			l.log.Warn("cannot launch the activities of a workflow", "workflow_exec_id", id, "error", err)
		}
	} else {
		l.mu.Lock()
		delete(l.defs, id) // it will not launch again
		l.mu.Unlock()
	}
	p.workflows[id] = w
	return w, nil
}

// try claims and launches one activity; ok is false when it was not ours
// to launch.
func (l *Launcher) try(ctx context.Context, p *pass, k state.ActivityKey) (ok bool, err error) {
	// The index is eventually consistent: read the item itself.
	a, err := l.st.GetActivity(ctx, k)
	if err != nil {
		return false, err
	}
	if a.State != state.Ready {
		return false, nil
	}
	w, err := l.workflow(ctx, p, k.WorkflowExecID)
	if err != nil {
		return false, err
	}
	if w.state != state.WorkflowRunning || w.def == nil {
		return false, nil // the monitor cancels what a settled workflow left
	}
	act := w.def.Activities[a.ActivityName]
	var settings workflow.Settings
	var backend Backend
	if act != nil {
		settings = w.def.Effective(a.ActivityName)
		if backend = l.cfg.Backends[settings.Launch.Type]; backend == nil {
			return false, nil // for a launcher with that backend
		}
	}

	// Claimed or not, the claim's answer must be known: from here on,
	// finish even if ctx ends.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), launchTimeout)
	defer cancel()
	claimed, err := l.claim(lctx, k)
	if claimed == nil || err != nil {
		return false, err
	}
	log := l.log.With("activity_exec_id", k.ActivityExecID)
	if act == nil {
		return true, l.fail(lctx, claimed, fmt.Errorf("activity %q is not in the workflow's definition", a.ActivityName))
	}
	job := l.job(claimed, w.def, act, settings)
	job.Token = claimed.Owner
	launchedAs, err := backend.Launch(lctx, job)
	if err != nil {
		log.Warn("launch failed", "error", err)
		return true, l.fail(lctx, claimed, err)
	}
	l.mu.Lock()
	l.running[k] = true
	l.mu.Unlock()
	log.Info("launched", "as", launchedAs, "type", settings.Launch.Type)
	// The wrapper may have moved on already; the record goes beside
	// whatever state it finds.
	if _, err := l.st.UpdateActivity(lctx, k, state.ActivityChange{
		From: state.ActivityStates, LaunchedAs: launchedAs,
	}); err != nil {
		log.Warn("recording the launch failed", "as", launchedAs, "error", err)
	}
	return true, nil
}

// claim moves a READY activity to QUEUED under a fresh token, and returns
// it when the move was this launcher's, nil when another launcher's. A
// write whose answer was lost (the SDK resends it, and the resend finds its
// own earlier move) is recognised by the token.
func (l *Launcher) claim(ctx context.Context, k state.ActivityKey) (*state.ActivityExec, error) {
	token := "launcher:" + uuid.NewString()
	claimed, err := l.st.UpdateActivity(ctx, k, state.ActivityChange{
		From: []state.ActivityState{state.Ready}, To: state.Queued, Hold: token,
	})
	var ce *state.ConflictError
	switch {
	case err == nil:
		return claimed, nil
	case errors.As(err, &ce) && ce.Owner != token:
		return nil, nil // another launcher was first
	case errors.As(err, &ce):
		// Our own move landed; fall through to read it.
	}
	a, rerr := l.st.GetActivity(ctx, k)
	if rerr != nil {
		return nil, fmt.Errorf("claim %s: %w (and reading it back: %v)", k.ActivityExecID, err, rerr)
	}
	if a.State == state.Queued && a.Owner == token {
		return a, nil
	}
	return nil, nil
}

// Exited is told that the process a backend started for j has ended. If
// the wrapper never claimed the activity (it is still QUEUED under the
// launcher's token), it will never run: it is failed now, with why,
// instead of waiting for the queued timeout.
func (l *Launcher) Exited(ctx context.Context, j Job, status string) {
	if j.Token == "" {
		return
	}
	msg := fmt.Sprintf("whimbrel-run exited (%s) before claiming the activity", status)
	failed, err := l.st.UpdateActivity(ctx, j.Key, state.ActivityChange{
		From: []state.ActivityState{state.Queued}, To: state.Failed, Owner: j.Token,
		Error: msg, Reason: "launch failed: " + msg,
	})
	if err != nil {
		if !errors.Is(err, state.ErrConflict) { // claimed after all: its wrapper recorded the rest
			l.log.Warn("recording a wrapper that never claimed failed", "activity_exec_id", j.Key.ActivityExecID, "error", err)
		}
		return
	}
	l.log.Warn("a wrapper exited before claiming its activity", "activity_exec_id", j.Key.ActivityExecID, "status", status)
	if _, err := workflow.Advance(ctx, l.st, failed, l.log.Named("advance")); err != nil {
		l.log.Warn("advancing the workflow failed; the monitor will finish it", "error", err)
	}
}

// fail records a launch that did not happen and advances the workflow.
func (l *Launcher) fail(ctx context.Context, a *state.ActivityExec, cause error) error {
	msg := cause.Error()
	failed, err := l.st.UpdateActivity(ctx, a.ActivityKey, state.ActivityChange{
		From: []state.ActivityState{state.Queued}, To: state.Failed,
		Error: msg, Reason: "launch failed: " + msg,
	})
	if errors.Is(err, state.ErrConflict) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("record the failed launch of %s: %w", a.ActivityExecID, err)
	}
	_, err = workflow.Advance(ctx, l.st, failed, l.log.Named("advance"))
	return err
}

func (l *Launcher) definition(wf *state.WorkflowExec) (*workflow.Definition, error) {
	l.mu.Lock()
	d := l.defs[wf.WorkflowExecID]
	l.mu.Unlock()
	if d != nil {
		return d, nil
	}
	if wf.Definition == "" {
		return nil, fmt.Errorf("workflow %s has no stored definition (it was not started with whimbrel start), so its activities cannot be launched from here", wf.WorkflowExecID)
	}
	d, err := workflow.ParseStored(wf.Definition)
	if err != nil {
		return nil, fmt.Errorf("workflow %s: %w", wf.WorkflowExecID, err)
	}
	l.mu.Lock()
	l.defs[wf.WorkflowExecID] = d
	l.mu.Unlock()
	return d, nil
}

// job builds what the backend needs.
func (l *Launcher) job(a *state.ActivityExec, def *workflow.Definition, act *workflow.Activity, s workflow.Settings) Job {
	env := map[string]string{}
	for k, v := range s.Env {
		env[k] = v
	}
	for k, v := range l.cfg.StoreEnv {
		env[k] = v
	}
	env["WHIMBREL_ACTIVITY_EXEC_ID"] = a.ActivityExecID
	env["WHIMBREL_ACTIVITY_NAME"] = a.ActivityName
	env["WHIMBREL_WORKFLOW_EXEC_ID"] = a.WorkflowExecID
	env["WHIMBREL_WORKFLOW_NAME"] = def.Name
	for name, d := range map[string]workflow.Duration{
		"WHIMBREL_HEARTBEAT_INTERVAL": s.HeartbeatInterval,
		"WHIMBREL_HEARTBEAT_TIMEOUT":  s.HeartbeatTimeout,
		"WHIMBREL_TIMEOUT":            s.Timeout,
		"WHIMBREL_KILL_GRACE":         s.KillGrace,
	} {
		if d > 0 {
			env[name] = time.Duration(d).String()
		}
	}
	return Job{Key: a.ActivityKey, WorkflowName: def.Name, ActivityName: a.ActivityName, Attempt: a.Attempt,
		Command: act.Command, Env: env, Settings: s}
}

// launchNamespace seeds the name-based UUIDs that name launches.
var launchNamespace = uuid.MustParse("6f2b8c1a-3d4e-4f50-8a9b-0c1d2e3f4a5b")

// token names one launch of an activity, the same every time it is
// computed, for backends that refuse a second launch of one name (ECS's
// clientToken, Docker's container names).
func token(j Job) string {
	return uuid.NewSHA1(launchNamespace, []byte(j.Key.ActivityExecID+"/"+strconv.Itoa(j.Attempt))).String()
}
