package wrapper

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cenkalti/backoff/v4"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// The data contract between the wrapper and its command is state's
// (state.EnvInputs, state.EnvOutput, state.EnvProgress): plain files named in the
// command's environment.

// maxOutputFile bounds what is read of an output file: more than this
// cannot compact to state.MaxOutput in any reasonable file.
const maxOutputFile = 4 << 20

// Inputs is the content of the WHIMBREL_INPUTS file.
type Inputs struct {
	Params map[string]string `json:"params"`
	// Outputs holds the output of every direct upstream activity, by
	// name; {} for one that recorded none.
	Outputs map[string]json.RawMessage `json:"outputs"`
	// PreviousProgress is the last progress of the previous attempt of
	// this activity, so a retried attempt can resume (Temporal's
	// heartbeat details). Filled by previousProgress.
	PreviousProgress json.RawMessage `json:"previous_progress,omitempty"`
	// WorkflowState and Failed, for a finally activity: the state the
	// workflow's activities decided, and those that failed or timed out.
	WorkflowState string   `json:"workflow_state,omitempty"`
	Failed        []string `json:"failed,omitempty"`
}

// data is what one run hands its command and reads back.
type data struct {
	dir                      string
	inputs, output, progress string
	argv                     []string
	env                      []string
}

// DataError says why the activity's data could not be handed to the
// command or taken from it: the activity fails with it.
type DataError struct {
	Problems []string
}

func (e *DataError) Error() string { return strings.Join(e.Problems, "; ") }

// prepare writes the inputs file and resolves the templates of the
// command and env, from the execution as the store holds it: the
// parameters, the stored definition, and the outputs of the direct
// upstream activities. A *DataError means the command must not start.
func (r *run) prepare(ctx context.Context, claimed *state.ActivityExec) (*data, error) {
	wf := r.wf
	if wf == nil {
		var err error
		if wf, err = r.st.GetWorkflow(ctx, r.cfg.Key.WorkflowExecID); err != nil {
			return nil, fmt.Errorf("read the workflow: %w", err)
		}
	}
	var problems []string
	params, err := definition.StoredParams(wf.Params)
	if err != nil {
		problems = append(problems, err.Error())
		params = map[string]string{}
	}
	// Only this activity's entry of the definition is read: the others
	// are no concern of its run (see definition.Stored).
	var act *definition.Activity
	var eff definition.Settings
	var stored *definition.Stored
	if wf.Definition != "" {
		d, err := definition.ReadStored(wf.Definition) // its advance reads it again
		stored = d
		if err == nil {
			act, err = d.Activity(claimed.ActivityName)
		}
		if err == nil {
			eff, err = d.Effective(claimed.ActivityName)
		}
		if err != nil {
			// A foreign client's definition: no templates to resolve.
			act = nil
			r.log.Warn("the stored definition cannot be read for this activity; no templates are resolved and no upstream outputs handed over", "error", err)
		}
	}
	in := Inputs{Params: params, Outputs: map[string]json.RawMessage{}}
	tdata := definition.Data{Params: params, Outputs: map[string]json.RawMessage{}}
	if act != nil {
		ups, err := r.upstreams(ctx, wf.WorkflowExecID, act.DependsOn)
		if err != nil {
			return nil, err
		}
		for _, up := range act.DependsOn {
			in.Outputs[up] = json.RawMessage("{}")
			// A foreign client's output that is not JSON is no output.
			if a := ups[up]; a != nil && a.Output != "" && json.Valid([]byte(a.Output)) {
				in.Outputs[up] = json.RawMessage(a.Output)
				tdata.Outputs[up] = json.RawMessage(a.Output)
			}
		}
		if err := elementWhen(act, wf, params, ups, claimed); err != nil { // foreach_when.go
			return nil, err
		}
	}
	if in.PreviousProgress, err = r.previousProgress(ctx, claimed); err != nil {
		return nil, err
	}
	if err := finallyData(ctx, r.st, wf, claimed, &in, &tdata); err != nil { // finally.go
		return nil, err
	}

	dir, err := os.MkdirTemp(r.cfg.DataDir, "whimbrel-"+claimed.ActivityName+"-")
	if err != nil {
		return nil, fmt.Errorf("make the data directory: %w", err)
	}
	dt := &data{dir: dir, inputs: filepath.Join(dir, "inputs.json"),
		output: filepath.Join(dir, "output.json"), progress: filepath.Join(dir, "progress")}
	if act != nil && stored != nil {
		if err := r.mapOutputs(ctx, stored, wf.WorkflowExecID, dir, &in, &tdata); err != nil {
			dt.remove()
			return nil, err
		}
	}
	env := map[string]string{}
	elementData(claimed, &tdata, env)
	b, err := json.Marshal(in)
	if err == nil {
		err = os.WriteFile(dt.inputs, b, 0o600)
	}
	if err != nil {
		dt.remove()
		return nil, fmt.Errorf("write %s: %w", dt.inputs, err)
	}

	dt.argv = r.cfg.Command
	environ := r.cfg.Environ
	if environ == nil {
		environ = os.Environ()
	}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && inheritable(k) {
			env[k] = v
		}
	}
	if act != nil {
		if len(act.Command) > 0 {
			// The command is the definition's (the launchers pass it as
			// written); a command from elsewhere, such as an image's CMD,
			// holds no templates of ours.
			dt.argv = make([]string, len(r.cfg.Command))
			for i, arg := range r.cfg.Command {
				v, err := tdata.Resolve(arg)
				if err != nil {
					problems = append(problems, fmt.Sprintf("command[%d]: %v", i, err))
				}
				dt.argv[i] = v
			}
		}
		keys := make([]string, 0, len(eff.Env))
		for k := range eff.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v, err := tdata.Resolve(eff.Env[k])
			if err != nil {
				problems = append(problems, fmt.Sprintf("env %s: %v", k, err))
			}
			env[k] = v
		}
	}
	// The contract's variables win over the definition's env.
	env[state.EnvInputs], env[state.EnvOutput], env[state.EnvProgress] = dt.inputs, dt.output, dt.progress
	identityEnv(env, claimed)
	if in.WorkflowState != "" {
		env[EnvWorkflowState] = in.WorkflowState
	}
	elementData(claimed, &tdata, env)
	for k, v := range params {
		env[definition.ParamEnv(k)] = v
	}
	// The guard pipe is the wrapper's alone (close-on-exec): no variable
	// may name it to the command, whoever set one.
	delete(env, state.EnvGuardFD)
	if len(problems) > 0 {
		dt.remove()
		return nil, &DataError{Problems: problems}
	}
	for k, v := range env {
		dt.env = append(dt.env, k+"="+v)
	}
	sort.Strings(dt.env)
	return dt, nil
}

// previousProgress is the last progress of the attempt before this one,
// for WHIMBREL_INPUTS' "previous_progress", as Temporal's heartbeat
// details let a retry resume: a retry's item names the attempt it retries
// (retry_of). A first attempt has none, unless a claim of the same item
// before it recorded one.
func (r *run) previousProgress(ctx context.Context, claimed *state.ActivityExec) (json.RawMessage, error) {
	if claimed.RetryOf == "" {
		if claimed.Progress == "" {
			return nil, nil
		}
		return progressJSON(claimed.Progress), nil
	}
	prev, err := r.st.GetActivity(ctx, state.ActivityKey{ActivityExecID: claimed.RetryOf, WorkflowExecID: claimed.WorkflowExecID})
	if errors.Is(err, state.ErrNotFound) {
		return nil, nil // expired, or deleted by hand: nothing to resume from
	}
	if err != nil {
		return nil, fmt.Errorf("read the progress of the attempt before (%s): %w", claimed.RetryOf, err)
	}
	if prev.Progress == "" {
		return nil, nil
	}
	return progressJSON(prev.Progress), nil
}

// progressJSON is a progress as JSON: an object as it is, a line as a
// string.
func progressJSON(p string) json.RawMessage {
	t := strings.TrimSpace(p)
	if strings.HasPrefix(t, "{") && json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(p)
	return b
}

func (d *data) remove() {
	if d != nil && d.dir != "" {
		_ = os.RemoveAll(d.dir)
	}
}

// readOutput reads the output file: absent or empty is no output; else it
// must be one JSON object within state.MaxOutput bytes once compacted.
func (d *data) readOutput() (string, error) {
	f, err := os.Open(d.output)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", &DataError{Problems: []string{fmt.Sprintf("output file %s (%s): %v", d.output, state.EnvOutput, err)}}
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxOutputFile+1))
	if err != nil {
		return "", &DataError{Problems: []string{fmt.Sprintf("output file %s (%s): %v", d.output, state.EnvOutput, err)}}
	}
	return compactOutput(d.output, b)
}

// compactOutput checks and compacts an output file's content.
func compactOutput(file string, b []byte) (string, error) {
	fail := func(format string, args ...any) (string, error) {
		return "", &DataError{Problems: []string{fmt.Sprintf("output file %s (%s) ", file, state.EnvOutput) + fmt.Sprintf(format, args...)}}
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return "", nil
	}
	if len(b) > maxOutputFile {
		return fail("is over %d bytes; an output may be at most %d bytes (32 KiB) of compact JSON: pass big data by reference (write it to S3 or a shared volume, output its key)", maxOutputFile, state.MaxOutput)
	}
	if !utf8.Valid(b) {
		return fail("is not UTF-8 text: write a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return fail("is not JSON (%v): write a JSON object, such as {\"n\": 41}", err)
	}
	if buf.Len() == 0 || buf.Bytes()[0] != '{' {
		return fail("holds JSON that is not an object: write a JSON object, such as {\"n\": 41}")
	}
	if buf.Len() > state.MaxOutput {
		return fail("is %d bytes of compact JSON; an output may be at most %d bytes (32 KiB): pass big data by reference (write it to S3 or a shared volume, output its key)", buf.Len(), state.MaxOutput)
	}
	return buf.String(), nil
}

// readProgress reads the progress file: the latest progress, or "" when
// there is none (absent, empty, or over state.MaxProgress, which is
// logged and skipped).
func (d *data) readProgress() (string, error) {
	f, err := os.Open(d.progress)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, state.MaxProgress+2))
	if err != nil {
		return "", err
	}
	p := strings.ToValidUTF8(strings.TrimRight(string(b), "\r\n \t"), "\uFFFD")
	if len(p) > state.MaxProgress {
		return "", fmt.Errorf("progress file %s (%s) holds more than %d bytes: write a short line or a small JSON object", d.progress, state.EnvProgress, state.MaxProgress)
	}
	return p, nil
}

// progress is the heartbeat pump's source of progress: the file's latest
// content, or "" (a problem is logged once per distinct problem).
func (r *run) progress() string {
	if r.data == nil {
		return ""
	}
	p, err := r.data.readProgress()
	if err != nil {
		r.mu.Lock()
		seen := r.progressProblem == err.Error()
		r.progressProblem = err.Error()
		r.mu.Unlock()
		if !seen {
			r.log.Warn("progress not carried", "error", err)
		}
		return ""
	}
	return p
}

// fanIn is how many upstreams are read one by one; more are read with
// the workflow's activities, in one query and batched reads.
const fanIn = 4

// upstreams reads the direct upstream activities, by name: each one's
// final attempt, the one that completed (a retry is an item of its own,
// linked from the failed attempt by retried_by).
func (r *run) upstreams(ctx context.Context, workflowExecID string, names []string) (map[string]*state.ActivityExec, error) {
	out := map[string]*state.ActivityExec{}
	if len(names) <= fanIn {
		for _, up := range names {
			a, err := r.finalAttempt(ctx, state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(workflowExecID, up), WorkflowExecID: workflowExecID})
			if err != nil {
				return nil, fmt.Errorf("read the output of upstream %s: %w", up, err)
			}
			if a == nil {
				out = nil // a link not written yet: read them all
				break
			}
			out[up] = a
		}
		if out != nil {
			return out, nil
		}
	}
	acts, err := r.st.Activities(ctx, workflowExecID)
	if _, err = state.Skipped(err); err != nil { // a bad item is reported by the store
		return nil, fmt.Errorf("read the outputs of the upstream activities: %w", err)
	}
	latest := workflow.Latest(acts)
	for _, up := range names {
		// The listing goes through the workflow index, which on DynamoDB
		// may not show an upstream's last attempt yet (a retry that
		// completed within the index's lag). This activity runs because
		// every upstream completed: follow the links from the attempt the
		// index shows, with consistent reads, to the one that did.
		if a := latest[up]; a == nil || a.State != state.Completed {
			k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(workflowExecID, up), WorkflowExecID: workflowExecID}
			if a != nil {
				k.ActivityExecID = a.ActivityExecID
			}
			final, err := r.finalAttempt(ctx, k)
			if err != nil {
				return nil, fmt.Errorf("read the output of upstream %s: %w", up, err)
			}
			if final != nil {
				latest[up] = final
			}
		}
	}
	return latest, nil
}

// finalAttempt follows an activity's retried_by links from its first
// attempt to its last. It returns nil when the last one it reaches did
// not complete: a retry whose link is not written yet (its taker died;
// the monitor writes it).
func (r *run) finalAttempt(ctx context.Context, k state.ActivityKey) (*state.ActivityExec, error) {
	for range maxAttemptsFollowed {
		a, err := r.st.GetActivity(ctx, k)
		if err != nil {
			return nil, err
		}
		if a.RetriedBy == "" {
			if a.State != state.Completed {
				return nil, nil
			}
			return a, nil
		}
		k.ActivityExecID = a.RetriedBy
	}
	return nil, nil
}

// maxAttemptsFollowed bounds finalAttempt's walk, against a loop of links
// another client wrote.
const maxAttemptsFollowed = 100

// prepareRetrying prepares the data through passing store errors, for at
// most budget; one try may take up to half of it, and at least
// attemptTimeout (each store call is bounded on its own).
func (r *run) prepareRetrying(ctx context.Context, claimed *state.ActivityExec, budget time.Duration) (*data, error) {
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	var dt *data
	var last error
	op := func() error {
		actx, cancel := context.WithTimeout(ctx, max(attemptTimeout, budget/2))
		defer cancel()
		d, err := r.prepare(actx, claimed)
		var de *DataError
		switch {
		case err == nil:
			dt = d
			return nil
		case errors.As(err, &de), errors.As(err, new(*elementSkipped)), errors.Is(err, state.ErrNotFound), errors.Is(err, state.ErrInvalidItem):
			return backoff.Permanent(err)
		}
		last = err
		r.log.Warn("reading the activity's inputs failed; retrying", "error", err)
		return err
	}
	b := retryPolicy(100 * time.Millisecond)
	if err := backoff.Retry(op, backoff.WithContext(b, ctx)); err != nil {
		if last != nil && ctx.Err() != nil {
			err = last // more telling than the deadline
		}
		return nil, err
	}
	return dt, nil
}
