package wrapper

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// elementData hands the element of a for_each map an attempt runs for to
// its templates and its command's environment (docs/for-each.md).
func elementData(claimed *state.ActivityExec, tdata *definition.Data, env map[string]string) {
	if claimed.ItemIndex == nil {
		return
	}
	item := claimed.Item
	if item == "" {
		item = "null"
	}
	tdata.Element, tdata.Index = json.RawMessage(item), *claimed.ItemIndex
	env[state.EnvItem] = item
	env[state.EnvItemIndex] = strconv.Itoa(*claimed.ItemIndex)
}

// mapOutputs adds to the output of each for_each upstream the path of a
// JSON-lines file, written in dir, that holds the output of each of its
// elements in index order (null for one that recorded none, or did not
// complete): the map's output itself carries only its counts.
func (r *run) mapOutputs(ctx context.Context, d *definition.Stored, wfID, dir string, in *Inputs, tdata *definition.Data) error {
	for up, raw := range in.Outputs {
		act, err := d.Activity(up)
		if err != nil || act.ForEach == nil {
			continue
		}
		var out map[string]any
		if err := json.Unmarshal(raw, &out); err != nil {
			continue
		}
		n, ok := out["items"].(float64)
		if !ok {
			continue
		}
		path := filepath.Join(dir, "outputs-"+up+".jsonl")
		home, err := r.elementsHome(ctx, wfID, up)
		if err != nil {
			return fmt.Errorf("read the map %s: %w", up, err)
		}
		if err := r.writeElementOutputs(ctx, home, up, int(n), path); err != nil {
			return fmt.Errorf("write the outputs of the elements of %s: %w", up, err)
		}
		out["outputs_file"] = path
		b, err := json.Marshal(out)
		if err != nil {
			return err
		}
		in.Outputs[up] = b
		tdata.Outputs[up] = b
	}
	return nil
}

func (r *run) writeElementOutputs(ctx context.Context, wfID, name string, n int, path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for i := 0; i < n; i++ {
		a, err := r.finalAttempt(ctx, state.ActivityKey{ActivityExecID: state.ItemExecIDFor(wfID, name, i), WorkflowExecID: wfID})
		if err != nil && !errors.Is(err, state.ErrNotFound) {
			f.Close()
			return err
		}
		line := "null"
		if a != nil && a.Output != "" && json.Valid([]byte(a.Output)) {
			line = a.Output
		}
		w.WriteString(line + "\n")
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// elementsHome is the execution that holds the elements of the map
// named up: this one, unless a redrive carried the map whole.
func (r *run) elementsHome(ctx context.Context, wfID, up string) (string, error) {
	m, err := r.finalAttempt(ctx, state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(wfID, up), WorkflowExecID: wfID})
	if err != nil || m == nil {
		return wfID, err
	}
	return workflow.ElementsHome(ctx, r.st, m)
}
