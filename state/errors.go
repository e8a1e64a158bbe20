package state

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// ErrNotFound is returned (wrapped) when an item does not exist.
var ErrNotFound = errors.New("not found")

// ErrConflict is matched by every *ConflictError, for callers that only need
// to know that someone else moved first.
var ErrConflict = errors.New("conflict")

// ErrInvalidItem is matched by every *DecodeError and *SkippedError.
var ErrInvalidItem = errors.New("invalid item")

// ErrExists is matched by every *ExistsError.
var ErrExists = errors.New("already exists")

// TransitionError is returned when the contract does not allow a move. It is
// decided before anything is written.
type TransitionError struct {
	Kind    string // "activity" or "workflow"
	From    string // the current state
	To      string // the requested state
	Allowed string // the states From may move to, "" when From is terminal
}

func (e *TransitionError) Error() string {
	switch {
	case e.From == e.To:
		return fmt.Sprintf("%s is already %s", e.Kind, e.From)
	case e.Allowed == "" && isKnown(e.Kind, e.From):
		return fmt.Sprintf("%s state %s is terminal: it cannot move to %s", e.Kind, e.From, e.To)
	case e.Allowed == "":
		return fmt.Sprintf("%s state %q is unknown: it cannot move to %s", e.Kind, e.From, e.To)
	}
	return fmt.Sprintf("%s in state %s cannot move to %s (only to %s)", e.Kind, e.From, e.To, e.Allowed)
}

func isKnown(kind, s string) bool {
	if kind == "workflow" {
		return WorkflowState(s).Valid()
	}
	return ActivityState(s).Valid()
}

// ConflictError is returned when a conditional write was refused because the
// item did not hold what the write required: another participant moved
// first. It carries what the item actually held at that moment, so the
// loser knows the winner without another read.
type ConflictError struct {
	Kind    string // "activity" or "workflow"
	ID      string // the item's ID
	Want    string // what the write required, in words
	State   string // the state the item held
	Owner   string // the activity's owner token, if any
	Attempt int    // the activity's attempt number, if any
}

func (e *ConflictError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s is %s", e.Kind, e.ID, e.State)
	if e.Owner != "" {
		fmt.Fprintf(&b, " (owner %s, attempt %d)", e.Owner, e.Attempt)
	}
	if e.Want != "" {
		fmt.Fprintf(&b, ", wanted %s", e.Want)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// DecodeError is returned when an item read from a table is malformed: an
// attribute is missing, has the wrong type, or holds a value out of range.
// Such items come from foreign clients or hand edits; they are reported,
// never trusted. A listing skips them and goes on (see SkippedError).
type DecodeError struct {
	Table string // the table the item came from
	Key   string // the item's key, as far as it could be read: "ID" or "ID / RANGE"
	ID    string // the item's own ID (its hash key), "" if it could not be read
	Attr  string // the offending attribute
	Err   string // what is wrong with it
	// State is the item's state attribute as written, when it is a
	// String: what the item claims to be, for a listing to show.
	State string
}

// ItemError is the former name of DecodeError.
//
// Deprecated: use DecodeError.
type ItemError = DecodeError

func (e *DecodeError) Error() string {
	key := e.Key
	switch {
	case key == "":
		key = "(no key)"
	case !printable(key):
		key = strconv.Quote(key) // a hostile key must not drive a terminal
	}
	return fmt.Sprintf("malformed item %s in table %s: attribute %s: %s", key, e.Table, e.Attr, e.Err)
}

// Is makes errors.Is(err, ErrInvalidItem) true.
func (e *DecodeError) Is(target error) bool { return target == ErrInvalidItem }

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// SkippedError is returned by a listing (Activities, ActivitiesInState,
// Workflows, Dependencies, Dependents, Events, Registrations) that skipped
// items it could not decode, together with every item that did decode:
// one bad item never hides the others. Items names each skipped item.
// errors.Is(err, ErrInvalidItem) is true, and errors.As finds the first
// *DecodeError.
type SkippedError struct {
	Items []*DecodeError
}

func (e *SkippedError) Error() string {
	if len(e.Items) == 1 {
		return "skipped 1 item that could not be decoded: " + e.Items[0].Error()
	}
	return fmt.Sprintf("skipped %d items that could not be decoded, the first: %v", len(e.Items), e.Items[0])
}

// Unwrap returns the decode errors.
func (e *SkippedError) Unwrap() []error {
	out := make([]error, len(e.Items))
	for i, d := range e.Items {
		out[i] = d
	}
	return out
}

// Skipped splits the error of a listing: the items it skipped because
// they could not be decoded (the listing's other items are complete), and
// any other error (when the listing failed and returned nothing).
func Skipped(err error) (skipped []*DecodeError, other error) {
	var se *SkippedError
	if errors.As(err, &se) {
		return se.Items, nil
	}
	return nil, err
}

// ExistsError is returned when creating something that already exists: a
// workflow request that already created an execution.
type ExistsError struct {
	What string // what already exists, e.g. "workflow request nightly::1"
	// WorkflowExecID is the execution the earlier request created.
	WorkflowExecID string
}

func (e *ExistsError) Error() string {
	if e.WorkflowExecID != "" {
		return fmt.Sprintf("%s already exists: it started %s", e.What, e.WorkflowExecID)
	}
	return e.What + " already exists"
}

// Is makes errors.Is(err, ErrExists) true.
func (e *ExistsError) Is(target error) bool { return target == ErrExists }

// NotFoundError names the item that does not exist; it matches ErrNotFound.
type NotFoundError struct {
	Kind string // "activity", "workflow", …
	ID   string
}

func (e *NotFoundError) Error() string { return fmt.Sprintf("%s %s not found", e.Kind, e.ID) }

// Is makes errors.Is(err, ErrNotFound) true.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// ErrUnavailable is matched by every *UnavailableError, *TableMissingError
// and *ConfigError: the store cannot be used as configured, whatever the
// items hold. A daemon logs it and tries again at its next pass; a command
// exits (see docs/cli.md#exit-codes).
var ErrUnavailable = errors.New("store unavailable")

// UnavailableError is returned when the store did not answer: a network
// that drops the connection, an endpoint that accepts it and never
// answers. Every store call is bounded, so this is what a black-holed
// endpoint turns into, instead of a hang.
type UnavailableError struct {
	Store    string        // e.g. "DynamoDB"
	Endpoint string        // where it was reached for, e.g. "http://127.0.0.1:8000"
	Op       string        // the call, e.g. "Query"
	Timeout  time.Duration // the bound that passed; 0 when the call failed otherwise
	Hint     string        // what to check, for people
	Err      error
}

func (e *UnavailableError) Error() string {
	what := "did not answer " + e.Op
	if e.Timeout > 0 {
		what += " within " + e.Timeout.String()
	} else if e.Err != nil {
		what = "could not be reached for " + e.Op + ": " + e.Err.Error()
	}
	msg := fmt.Sprintf("%s at %s %s", e.Store, e.Endpoint, what)
	if e.Hint != "" {
		msg += ": " + e.Hint
	}
	return msg
}

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// Unwrap returns the cause.
func (e *UnavailableError) Unwrap() error { return e.Err }

// TableMissingError is returned when a table the call needs does not
// exist: Whimbrel's tables were not installed under this prefix, in this
// store.
type TableMissingError struct {
	Table  string // the table's full name
	Prefix string // the table prefix in use
	Store  string // the store, e.g. "dynamodb" or "sqlite:/path/state.db"
	Err    error
}

func (e *TableMissingError) Error() string {
	return fmt.Sprintf("table %s does not exist: run `whimbrel install` (prefix %q, store %s)", e.Table, e.Prefix, e.Store)
}

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *TableMissingError) Is(target error) bool { return target == ErrUnavailable }

// Unwrap returns the cause.
func (e *TableMissingError) Unwrap() error { return e.Err }

// ConfigError is returned when the store cannot be reached as configured:
// no region, no credentials. Msg says what to set.
type ConfigError struct {
	Msg string
	Err error
}

func (e *ConfigError) Error() string { return e.Msg }

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *ConfigError) Is(target error) bool { return target == ErrUnavailable }

// Unwrap returns the cause.
func (e *ConfigError) Unwrap() error { return e.Err }
