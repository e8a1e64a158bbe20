package launcher

import (
	"context"

	"github.com/whimbrel/whimbrel/state"
)

// workflowStater is a store that reads a workflow's state without the
// rest of its item (both stores are).
type workflowStater interface {
	WorkflowState(ctx context.Context, id string) (state.WorkflowState, error)
}

// knownWorkflow is what a pass reads of a workflow whose definition the
// launcher has parsed before: its state alone, since a definition never
// changes. ok is false when the definition is not known yet, or the store
// reads only whole items: the caller then reads the item.
func (l *Launcher) knownWorkflow(ctx context.Context, id string) (w *passWorkflow, ok bool, err error) {
	ws, can := l.st.(workflowStater)
	if !can {
		return nil, false, nil
	}
	d := l.defs.known(id)
	if d == nil {
		return nil, false, nil
	}
	s, err := ws.WorkflowState(ctx, id)
	if err != nil {
		return nil, true, err
	}
	w = &passWorkflow{state: s}
	if s == state.WorkflowRunning {
		w.def, w.item = d, l.defs.item(id, s)
	} else {
		l.defs.forget(id) // it will not launch again
	}
	return w, true, nil
}
