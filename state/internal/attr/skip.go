package attr

import (
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/state"
)

// ReportEvery is how long a store stays quiet about an item it reported
// as undecodable: a daemon that meets the same bad item on every sweep
// says so once, not every few seconds.
const ReportEvery = time.Hour

// maxReported bounds the memory of what was reported; past it, the memory
// starts afresh (and an item may be reported once more).
const maxReported = 10000

// Reporter logs the items a store could not decode: each once per
// ReportEvery, with its table, key, attribute and reason. It is safe for
// concurrent use.
type Reporter struct {
	log hclog.Logger

	mu   sync.Mutex
	seen map[string]time.Time
}

// NewReporter returns a Reporter that logs to log.
func NewReporter(log hclog.Logger) *Reporter {
	return &Reporter{log: log, seen: map[string]time.Time{}}
}

// Report logs e unless the same item was reported with the same problem
// within ReportEvery.
func (r *Reporter) Report(e *state.DecodeError) {
	id := e.Table + "\x00" + e.Key + "\x00" + e.Attr + "\x00" + e.Err
	now := time.Now()
	r.mu.Lock()
	last, ok := r.seen[id]
	if !ok || now.Sub(last) >= ReportEvery {
		if len(r.seen) >= maxReported {
			r.seen = map[string]time.Time{}
		}
		r.seen[id] = now
	}
	r.mu.Unlock()
	if ok && now.Sub(last) < ReportEvery {
		return
	}
	r.log.Warn("skipping an item that cannot be decoded; fix or delete it",
		"table", e.Table, "key", printable(e.Key), "attribute", e.Attr, "reason", e.Err, "state", printable(e.State))
}

// Check reports err if it is a *state.DecodeError, and returns it: for
// the reads of one item, whose callers decide what to do with it.
func (r *Reporter) Check(err error) error {
	var de *state.DecodeError
	if errors.As(err, &de) {
		r.Report(de)
	}
	return err
}

// Skips collects what one listing skipped.
type Skips struct {
	r     *Reporter
	items []*state.DecodeError
}

// NewSkips starts a listing's collection.
func (r *Reporter) NewSkips() *Skips { return &Skips{r: r} }

// Add takes the error of decoding one item: a *state.DecodeError is
// reported and kept, and Add returns nil so the listing goes on; any other
// error is returned, to stop it.
func (s *Skips) Add(err error) error {
	var de *state.DecodeError
	if err == nil || !errors.As(err, &de) {
		return err
	}
	s.r.Report(de)
	s.items = append(s.items, de)
	return nil
}

// Err is the listing's *state.SkippedError, nil if nothing was skipped.
func (s *Skips) Err() error {
	if len(s.items) == 0 {
		return nil
	}
	return &state.SkippedError{Items: s.items}
}

// printable quotes what another client wrote when it holds anything a
// terminal would act on.
func printable(s string) string {
	if cleanID(s) {
		return s
	}
	return strconv.Quote(s)
}
