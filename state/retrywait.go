package state

import (
	"context"
	"time"
)

// A retry that waits out a delay is created set aside ("parked"),
// so that the READY listing launchers read each pass holds what may be
// launched, however many retries wait: its item carries retry_wait (its
// not_before), which takes it out of ActivitiesInState's READY listing
// and into the waiting retries' listing. Its state stays READY and its
// state time unchanged, so a reader that knows only the base contract
// still sees it READY (docs/contract.md#waiting-retries). The monitor's
// sweep lists the waiting retries and puts back, with one conditional
// write each, those whose not_before has passed; the launchers put back
// those due soon as they become due (retrysoon.go).

// AttrRetryWait marks a READY retry parked while it waits out its delay:
// its value is the retry's not_before (epoch seconds).
const AttrRetryWait = "retry_wait"

// RetryParkAfter is the shortest delay of a retry parked to wait long: it
// is put back by the first monitor sweep after its not_before (and, on the
// embedded store, by the launchers too). One with a delay from
// RetryParkSoon up to this is parked to wait briefly: the launchers put
// it back as it becomes due (DueRetryQueue).
const RetryParkAfter = time.Minute

// ParksRetry reports whether a is written parked: a READY item whose
// not_before is at least RetryParkSoon after its state time. It depends
// only on the item, so every writer of the same item decides the same.
func ParksRetry(a *ActivityExec) bool {
	return a.State == Ready && !a.NotBefore.IsZero() && !a.StateTime.IsZero() && a.NotBefore.Sub(a.StateTime) >= RetryParkSoon
}

// RetryQueue is what a store offers to list and put back the retries
// parked while they wait out their delay. Both stores implement it.
type RetryQueue interface {
	// WaitingRetries lists the parked retries, oldest first by state
	// time. On DynamoDB it is read through an index: a retry put back a
	// moment ago may be listed still.
	WaitingRetries(ctx context.Context) ([]ActivityRef, error)
	// UnparkRetry puts a parked retry back in the READY listing, in one
	// write conditional on its being READY; a *ConflictError when it is
	// not (it moved on, and left the listing with its move).
	UnparkRetry(ctx context.Context, k ActivityKey) error
}
