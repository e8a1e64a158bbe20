// Package attr is what the state stores share below the domain: items as
// maps of typed attribute values (DynamoDB's data model, which the
// contract's tables use), their encoding to and from the domain types with clear
// errors for malformed items, and, for each change, the condition it needs
// and the attributes it sets. The DynamoDB store turns these into
// expressions; the SQLite store evaluates and applies them itself. Both so
// behave alike, which the conformance suite checks.
package attr

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/whimbrel/whimbrel/internal/jsonobj"
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

// MarshalJSON writes the item in DynamoDB's JSON form ({"S": "…"}), which
// is how the SQLite store keeps it.
func (it Item) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(it))
	for k, v := range it {
		m[k] = toJSON(v)
	}
	return json.Marshal(m)
}

func toJSON(v Value) any {
	switch v := v.(type) {
	case S:
		return map[string]any{"S": string(v)}
	case N:
		return map[string]any{"N": string(v)}
	case Bool:
		return map[string]any{"BOOL": bool(v)}
	case L:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = toJSON(e)
		}
		return map[string]any{"L": out}
	case SS:
		s := append([]string(nil), v...)
		sort.Strings(s)
		return map[string]any{"SS": s}
	case Other:
		return map[string]any{"X": string(v)}
	}
	return map[string]any{"NULL": true}
}

// UnmarshalJSON reads what MarshalJSON writes. Unknown forms become Other,
// so a malformed item is reported by the decoder, not lost here.
//
// encoding/json hands it valid JSON: it is split into members once
// (jsonobj), not checked and skipped again at each level, for an item
// may be large (a workflow's, with its definition).
func (it *Item) UnmarshalJSON(b []byte) error {
	raw := map[string][]byte{}
	if err := jsonobj.Members(b, func(k string, v []byte) { raw[k] = v }); err != nil {
		return fmt.Errorf("an item: %w", err)
	}
	*it = make(Item, len(raw))
	for k, r := range raw {
		(*it)[k] = fromJSON(r)
	}
	return nil
}

func fromJSON(r []byte) Value {
	tagged := map[string][]byte{}
	if err := jsonobj.Members(r, func(k string, v []byte) { tagged[k] = v }); err != nil || len(tagged) != 1 {
		return Other("an unreadable value")
	}
	for tag, body := range tagged {
		switch tag {
		case "S":
			var s string
			if json.Unmarshal(body, &s) == nil {
				return S(s)
			}
		case "N":
			var s string
			if json.Unmarshal(body, &s) == nil {
				return N(s)
			}
		case "BOOL":
			var b bool
			if json.Unmarshal(body, &b) == nil {
				return Bool(b)
			}
		case "L":
			var elems []json.RawMessage
			if json.Unmarshal(body, &elems) == nil {
				out := make(L, len(elems))
				for i, e := range elems {
					out[i] = fromJSON(e)
				}
				return out
			}
		case "SS":
			var ss []string
			if json.Unmarshal(body, &ss) == nil {
				return SS(ss)
			}
		case "NULL":
			return Null{}
		case "M":
			return Other("a Map")
		case "X":
			var s string
			if json.Unmarshal(body, &s) == nil {
				return Other(s)
			}
		}
		return Other(fmt.Sprintf("an unreadable %s value", tag))
	}
	return Other("an unreadable value")
}
