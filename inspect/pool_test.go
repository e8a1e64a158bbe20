package inspect_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/inspect"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/workflow"
)

// TestStatusSaysWhoHoldsAndWhoWaits: an activity of a pool that is not
// defined says so; once the pool is full, it says how full; the pool's
// view lists its holder and its waiter. Hostile names stay inert.
func TestStatusSaysWhoHoldsAndWhoWaits(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Install(ctx, false); err != nil {
		t.Fatal(err)
	}
	d, err := definition.Parse("p.yaml", []byte("name: p\ndefaults: {pool: warehouse}\nactivities:\n  load: {command: ['true'], pool_slots: 2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	use := func() *inspect.PoolUse {
		t.Helper()
		s, err := inspect.Load(ctx, st, id, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := s.WriteText(&buf); err != nil {
			t.Fatal(err)
		}
		if u := s.Activities[0].Pool; u == nil || !strings.Contains(buf.String(), u.Text()) {
			t.Fatalf("status shows no pool line: %+v\n%s", u, buf.String())
		}
		return s.Activities[0].Pool
	}
	if u := use(); u.Text() != "waiting for pool warehouse: not defined" {
		t.Errorf("undefined: %q", u.Text())
	}
	now := time.Now()
	if _, err := state.SetPool(ctx, st, "warehouse", 3, "<script>", now); err != nil {
		t.Fatal(err)
	}
	other := state.PoolHolder{ActivityExecID: "x\x1b[31m::1", WorkflowExecID: "other::1", ActivityName: "x\x1b[31m", Slots: 2, Since: now, LeaseUntil: now.Add(time.Minute)}
	if err := state.AcquireSlots(ctx, st, "warehouse", other); err != nil {
		t.Fatal(err)
	}
	if u := use(); u.Text() != "waiting for pool warehouse: 2 of 3 slots held" {
		t.Errorf("full: %q", u.Text())
	}
	v, err := inspect.Pool(ctx, st, "warehouse")
	if err != nil {
		t.Fatal(err)
	}
	if v.InUse != 2 || v.Waiting != 1 || len(v.Holders) != 1 || v.Waiters[0].WorkflowID != id || v.Waiters[0].Slots != 2 {
		t.Errorf("pool view: %+v", v)
	}
	var buf bytes.Buffer
	if err := inspect.WritePool(&buf, v, time.Now()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "\x1b") || !strings.Contains(buf.String(), id) {
		t.Errorf("pool show:\n%s", buf.String())
	}
	list, err := inspect.Pools(ctx, st)
	if err != nil || len(list) != 1 || list[0].Waiting != 1 {
		t.Errorf("pool list: %+v, %v", list, err)
	}
	if _, err := inspect.Pool(ctx, st, "nowhere"); err == nil {
		t.Error("a pool neither defined nor waited for was shown")
	}
}
