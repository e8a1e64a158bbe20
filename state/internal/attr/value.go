// Package attr is what the state stores share below the domain: items as
// maps of typed attribute values (DynamoDB's data model, which the
// contract's tables use), their encoding to and from the domain types with clear
// errors for malformed items, and, for each change, the condition it needs
// and the attributes it sets. The DynamoDB store turns these into
// expressions; the SQLite store evaluates and applies them itself. Both so
// behave alike, which the conformance suite checks.
package attr

import (
	"strconv"
	"time"

	"github.com/whimbrel/whimbrel/state"
)

// Value is one attribute value.
type Value interface{ kind() string }

// The value types the codec reads and writes.
type (
	S     string   // String
	N     string   // Number, as decimal text
	Bool  bool     // Boolean
	L     []Value  // List
	SS    []string // String Set
	Null  struct{} // NULL
	Other string   // a type the codec does not use, by name ("a Map", …)
)

func (S) kind() string       { return "a String" }
func (N) kind() string       { return "a Number" }
func (Bool) kind() string    { return "a Boolean" }
func (L) kind() string       { return "a List" }
func (SS) kind() string      { return "a String Set" }
func (Null) kind() string    { return "NULL" }
func (o Other) kind() string { return string(o) }

// Item is one item: attribute name → value.
type Item map[string]Value

// Int is a whole Number.
func Int(v int) N { return N(strconv.Itoa(v)) }

// Seconds is a duration as a Number of seconds.
func Seconds(d time.Duration) N { return N(strconv.FormatFloat(d.Seconds(), 'f', -1, 64)) }

// Epoch is a time as epoch seconds with milliseconds.
func Epoch(t time.Time) N { return N(state.FormatEpoch(t)) }

// List is a time as the contract's [Y, M, D, h, m, s] list of Numbers.
func List(t time.Time) L {
	tl := state.NewTimeList(t)
	out := make(L, len(tl))
	for i, v := range tl {
		out[i] = N(strconv.FormatFloat(v, 'f', -1, 64))
	}
	return out
}

// Clone copies an item deeply enough to change it.
func (it Item) Clone() Item {
	out := make(Item, len(it))
	for k, v := range it {
		out[k] = v
	}
	return out
}
