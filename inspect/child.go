package inspect

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/inert"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// ChildView is what Status shows of an activity that runs a child
// workflow (docs/sub-workflows.md): the child's ID, to follow, and, in a
// tree (LoadTree), the child's own status in place.
type ChildView struct {
	Child       string  `json:"child_workflow_exec_id,omitempty"`
	ChildStatus *Status `json:"child,omitempty"`
}

// ParentView names, on a child workflow, the activity that runs it.
type ParentView struct {
	ParentWorkflow string `json:"parent_workflow_exec_id,omitempty"`
	ParentActivity string `json:"parent_activity_exec_id,omitempty"`
}

func childView(a *state.ActivityExec) ChildView {
	id, _ := state.ChildOf(a)
	return ChildView{Child: id}
}

func parentView(w *state.WorkflowExec) ParentView {
	return ParentView{ParentWorkflow: w.ParentWorkflowExecID, ParentActivity: w.ParentActivityExecID}
}

// LoadTree is Load with the status of every child workflow in place,
// down the tree (at most definition.DefaultMaxDepth deep). A child that
// cannot be read is left as its ID: the parent's status stands.
func LoadTree(ctx context.Context, st workflow.Reader, id string, now time.Time) (*Status, error) {
	return loadTree(ctx, st, id, now, map[string]bool{id: true}, 1)
}

func loadTree(ctx context.Context, st workflow.Reader, id string, now time.Time, seen map[string]bool, depth int) (*Status, error) {
	s, err := Load(ctx, st, id, now)
	if err != nil || depth >= definition.DefaultMaxDepth {
		return s, err
	}
	for i := range s.Activities {
		a := &s.Activities[i]
		if a.Child == "" || seen[a.Child] { // another client's loop of links
			continue
		}
		seen[a.Child] = true
		if _, err := state.WorkflowNameOf(a.Child); err != nil {
			continue // another client's owner: not an execution's ID
		}
		c, err := loadTree(ctx, st, a.Child, now, seen, depth+1)
		if errors.Is(err, state.ErrUnavailable) {
			return nil, err
		}
		a.ChildStatus = c // nil when it cannot be read: its ID stands
	}
	return s, nil
}

// writeParent says, under a child workflow's heading, whose child it is.
func (p ParentView) writeText(w io.Writer) {
	if p.ParentWorkflow == "" {
		return
	}
	fmt.Fprintf(w, "  child of %s, activity %s\n", inert.String(p.ParentWorkflow), inert.String(orDash(p.ParentActivity)))
}

// writeText writes, under an activity's row, the child workflow it runs:
// its ID to follow or, in a tree, its status indented in place.
func (c ChildView) writeText(w io.Writer, indent string, colors Colors) {
	if c.Child == "" {
		return
	}
	if c.ChildStatus == nil {
		fmt.Fprintf(w, "%schild workflow %s (whimbrel status %s)\n", indent, inert.String(c.Child), inert.String(c.Child))
		return
	}
	var b bytes.Buffer
	_ = c.ChildStatus.WriteTextColors(&b, colors)
	for _, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		fmt.Fprintf(w, "%s│ %s\n", indent, l)
	}
}
