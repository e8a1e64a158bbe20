package reliability

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/monitor"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// suiteFaults are what DynamoDB may do and the emulator does not, as the
// suite's participants meet them: indexes 2 s behind their tables, 5% of
// calls throttled, 1% answered 500 (half of those on writes after the
// write was applied), 5% of transactions cancelled for a conflict, every
// batch half unprocessed, pages of 5 items.
func suiteFaults() dynamotest.Faults {
	return dynamotest.Faults{IndexLag: 2 * time.Second, Throttle: 0.05, Errors: 0.01, AfterWrite: 0.5,
		Conflicts: 0.05, PartialBatches: true, PageSize: 5}
}

// crashSkew is TestCrashes' monitors' --skew: its leases are short (a
// 2 s heartbeat timeout), so that killed wrappers are found quickly.
const crashSkew = time.Second

// rig is where a test's participants meet the store: behind the fault
// proxy, with clocks that disagree by half the tolerance. With
// WHIMBREL_RELIABILITY_PROXY=off they reach the emulator directly, on
// one clock, for comparison.
type rig struct {
	proxy *dynamotest.FaultProxy
	// st is the test's own store: the proxy's clean side, which records
	// the writes for the lagging view and injects nothing.
	st  *dynamodb.Store
	env []string
	// tolerance is the skew the monitors allow for (--skew).
	tolerance time.Duration
}

func newRig(t *testing.T, target string) *rig {
	t.Helper()
	if os.Getenv("WHIMBREL_RELIABILITY_PROXY") != "off" {
		return newRigWith(t, target, suiteFaults())
	}
	r := &rig{tolerance: monitor.DefaultSkew}
	prefix := dynamotest.Prefix(t)
	if target != "" {
		r.st = dynamodb.New(dynamotest.ClientAt(t, target), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout})
	} else {
		r.st = dynamodb.New(dynamotest.Client(t), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout})
	}
	r.env = dynamotest.Env(t, prefix)
	r.install(t)
	return r
}

// newRigWith is newRig with the faults f, always behind the proxy (the
// focused tests need it).
func newRigWith(t *testing.T, target string, f dynamotest.Faults) *rig {
	t.Helper()
	r := &rig{tolerance: monitor.DefaultSkew}
	prefix := dynamotest.Prefix(t)
	r.proxy = dynamotest.NewFaultProxy(t, target, f)
	r.st = dynamodb.New(r.proxy.Client(true), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout})
	r.install(t)
	r.env = r.proxy.Env(t, prefix)
	return r
}

func (r *rig) install(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := r.st.Install(ctx, false); err != nil {
		t.Fatalf("install tables: %v", err)
	}
}

// endpoint is where participants reach the store.
func (r *rig) endpoint(direct string) string {
	if r.proxy == nil {
		return direct
	}
	return r.proxy.Endpoint
}

// clock is the clock offset of launcher i (and of the wrappers it
// starts): a quarter of the tolerance behind, or ahead, in turn. The
// monitors' clocks are a quarter ahead: no two clocks differ by more
// than half the tolerance, and every other wrapper's is that far behind
// the monitors', the side on which its heartbeats look old.
func (r *rig) clock(i int) time.Duration {
	if r.proxy == nil {
		return 0
	}
	if i%2 == 0 {
		return -r.tolerance / 4
	}
	return r.tolerance / 4
}

func (r *rig) monitorClock() time.Duration {
	if r.proxy == nil {
		return 0
	}
	return r.tolerance / 4
}

// report logs what the proxy did.
func (r *rig) report(t *testing.T) {
	if r.proxy != nil {
		t.Logf("behind the fault proxy: %s", r.proxy.Stats())
	}
}
