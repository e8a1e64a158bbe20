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
	"sync"

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

// outputReaders is how many elements writeElementOutputs reads at once:
// a map's downstream reads every element before its command starts, and
// one read after another takes seconds for thousands of elements.
const outputReaders = 16

// outputChunk is how many elements' outputs writeElementOutputs holds in
// memory at once, between reading them and writing them out in order.
const outputChunk = 1000

func (r *run) writeElementOutputs(ctx context.Context, wfID, name string, n int, path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	lines := make([]string, min(n, outputChunk))
	for lo := 0; lo < n; lo += outputChunk {
		hi := min(n, lo+outputChunk)
		if err := r.readElementOutputs(ctx, wfID, name, lo, hi, lines); err != nil {
			f.Close()
			return err
		}
		for _, l := range lines[:hi-lo] {
			w.WriteString(l + "\n")
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readElementOutputs reads the outputs of elements lo..hi-1 into
// lines[0:hi-lo] ("null" for one that recorded none, or did not
// complete), outputReaders at a time; every reader ends before it
// returns.
func (r *run) readElementOutputs(ctx context.Context, wfID, name string, lo, hi int, lines []string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range min(outputReaders, hi-lo) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				a, err := r.finalAttempt(ctx, state.ActivityKey{ActivityExecID: state.ItemExecIDFor(wfID, name, i), WorkflowExecID: wfID})
				if err != nil && !errors.Is(err, state.ErrNotFound) {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					cancel()
					continue
				}
				line := "null"
				if a != nil && a.Output != "" && json.Valid([]byte(a.Output)) {
					line = a.Output
				}
				lines[i-lo] = line
			}
		}()
	}
feed:
	for i := lo; i < hi; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = ctx.Err()
	}
	return first
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
