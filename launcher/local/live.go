package local

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// liveRuns are, by workflow, the activities supervised inline whose claim
// landed and whose run has not yet advanced the workflow past them. Such
// an activity is not terminal in the store until its run records it, and
// its run then advances the workflow: while one of a workflow's is
// listed, another run's advance need not look whether the workflow is
// done (a settle's probe and, near the end, its listing). The run that
// leaves the workflow's list empty looks, as any advance does: through
// its own advance (Recorded), or, when it ends without one (its outcome
// was written by someone else, or not at all) after another run's advance
// relied on it, through a settle of its own (ended).
type liveRuns struct {
	mu sync.Mutex
	by map[string]*liveOf // by workflow_exec_id
}

type liveOf struct {
	keys map[state.ActivityKey]struct{}
	// relied is set when an advance skipped its settle because of keys:
	// the last one to leave must look.
	relied bool
}

// claimed lists k, whose claim landed.
func (l *liveRuns) claimed(k state.ActivityKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.by == nil {
		l.by = map[string]*liveOf{}
	}
	w := l.by[k.WorkflowExecID]
	if w == nil {
		w = &liveOf{keys: map[state.ActivityKey]struct{}{}}
		l.by[k.WorkflowExecID] = w
	}
	w.keys[k] = struct{}{}
}

// leave takes k off its workflow's list, and reports whether it was on it
// and whether it was the last one there after an advance relied on the
// list (the caller must then look whether the workflow is done).
func (l *liveRuns) leave(k state.ActivityKey) (was, mustLook bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.by[k.WorkflowExecID]
	if w == nil {
		return false, false
	}
	if _, was = w.keys[k]; !was {
		return false, false
	}
	delete(w.keys, k)
	if len(w.keys) > 0 {
		return true, false
	}
	delete(l.by, k.WorkflowExecID)
	return true, w.relied
}

// live reports whether the workflow id has a listed run, and notes that
// an advance relies on it (workflow.WithKnownLive).
func (l *liveRuns) live(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.by[id]
	if w == nil || len(w.keys) == 0 {
		return false
	}
	w.relied = true
	return true
}

// liveSettleTimeout bounds the settle of a run that ended without its own
// advance after another run's advance relied on it.
const liveSettleTimeout = time.Minute

// ended is told that the run of k has ended. If it was still listed (it
// never advanced the workflow itself) and was the last that an advance
// relied on, it settles the workflow, as that advance would have.
func (b *Backend) runEnded(k state.ActivityKey, log hclog.Logger) {
	if _, look := b.live.leave(k); !look {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), liveSettleTimeout)
	defer cancel()
	if _, err := workflow.Settle(ctx, b.Store, k.WorkflowExecID, log.Named("settle")); err != nil {
		log.Warn("settling the workflow failed; the monitor will finish it", "error", err)
	}
}
