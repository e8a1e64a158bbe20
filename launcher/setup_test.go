package launcher_test

import (
	"context"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/state"
)

// deadlineReads answers ActivitiesInState as a store does: it fails once
// its context has ended, and remembers the deadline it was given.
type deadlineReads struct{ left time.Duration }

func (r *deadlineReads) ActivitiesInState(ctx context.Context, _ state.ActivityQuery) ([]state.ActivityRef, error) {
	if d, ok := ctx.Deadline(); ok {
		r.left = time.Until(d)
	}
	return nil, ctx.Err()
}

// TestCheckStoreBoundsItsReadByDefault: a Setup that has not been through
// Check (or was given no StartTimeout) still bounds its store check by the
// default 20 s, rather than by none at all, which would fail every check.
func TestCheckStoreBoundsItsReadByDefault(t *testing.T) {
	r := &deadlineReads{}
	if err := (&launcher.Setup{}).CheckStore(context.Background(), r, "test store"); err != nil {
		t.Fatalf("CheckStore on a store that answers: %v", err)
	}
	if r.left < 10*time.Second || r.left > 20*time.Second {
		t.Errorf("the check had %s left, want the default of 20s", r.left)
	}
	r = &deadlineReads{}
	if err := (&launcher.Setup{StartTimeout: 3 * time.Second}).CheckStore(context.Background(), r, "test store"); err != nil || r.left > 3*time.Second {
		t.Errorf("StartTimeout 3s: err %v, %s left", err, r.left)
	}
}
