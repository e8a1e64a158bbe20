package state

import (
	"context"
	"time"
)

// Retries due soon. A retry whose delay is at least RetryParkSoon and
// shorter than RetryParkAfter is parked too, so that however many of them
// wait, none crowds launchable work out of a pass; the launchers put each
// back as its not_before passes (DueRetryQueue), which no monitor could
// do promptly. A store lists them by the window of RetryWindow their
// not_before falls in: a launcher reads each window as it ends, and finds
// the due retries without reading one that is not due
// (docs/contract.md#waiting-retries).

// RetryParkSoon is the shortest delay for which a retry is created parked.
// A retry with a shorter delay stays in the READY listing, where the
// launchers pass over it without a read until its not_before: it crowds a
// pass for less than this long, and becomes launchable about as soon as a
// put-back one would.
const RetryParkSoon = 5 * time.Second

// RetryWindow is the span of not_before times whose parked retries a
// store lists together (DueRetryQueue). Windows start at whole multiples
// of it (Unix time).
const RetryWindow = time.Second

// DueRetryQueue is what a store offers launchers to put back the parked
// retries as they become due. Both stores implement it.
type DueRetryQueue interface {
	RetryQueue
	// DueRetries lists up to limit parked retries whose not_before is
	// before end, which must be the end of a window (a multiple of
	// RetryWindow): at least those whose not_before falls in that window
	// and were parked with a delay under RetryParkAfter, and those that
	// any earlier window of the same listing left. It never lists a
	// retry whose not_before is at or after end. On DynamoDB it is read
	// through an index: a retry put back a moment ago may be listed
	// still.
	DueRetries(ctx context.Context, end time.Time, limit int) ([]ActivityRef, error)
	// RetryCycle is how many consecutive windows' listings it takes to
	// list every parked retry due before the last one's end: a reader
	// that has read the last RetryCycle windows has missed none.
	RetryCycle() int
}

// WindowEnd is the end of the latest window of RetryWindow that has
// ended at t.
func WindowEnd(t time.Time) time.Time { return t.Truncate(RetryWindow) }
