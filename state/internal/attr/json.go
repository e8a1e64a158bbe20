package attr

import (
	"encoding/json"
	"fmt"
	"sort"
	"unicode/utf8"

	"github.com/whimbrel/whimbrel/internal/jsonobj"
)

// The SQLite store keeps every item as DynamoDB JSON and reads or writes
// one at every call, so this codec is on the path of every store call a
// launcher, a wrapper and a monitor make. It writes the JSON directly and
// reads it in one pass over the item (jsonobj), decoding a string through
// encoding/json only when it holds an escape; what it writes and reads is
// byte for byte what encoding/json makes of the same item as maps.

// MarshalJSON writes the item in DynamoDB's JSON form ({"S": "…"}), which
// is how the SQLite store keeps it: members in key order, as encoding/json
// orders a map's.
func (it Item) MarshalJSON() ([]byte, error) {
	keys := make([]string, 0, len(it))
	for k := range it {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b := make([]byte, 0, 64*len(keys))
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = appendValue(b, it[k])
	}
	return append(b, '}'), nil
}

// appendValue writes one tagged value.
func appendValue(b []byte, v Value) []byte {
	switch v := v.(type) {
	case S:
		return append(appendString(append(b, `{"S":`...), string(v)), '}')
	case N:
		return append(appendString(append(b, `{"N":`...), string(v)), '}')
	case Bool:
		if v {
			return append(b, `{"BOOL":true}`...)
		}
		return append(b, `{"BOOL":false}`...)
	case L:
		b = append(b, `{"L":[`...)
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendValue(b, e)
		}
		return append(b, "]}"...)
	case SS:
		if len(v) == 0 {
			return append(b, `{"SS":null}`...)
		}
		s := append([]string(nil), v...)
		sort.Strings(s)
		b = append(b, `{"SS":[`...)
		for i, e := range s {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, e)
		}
		return append(b, "]}"...)
	case Other:
		return append(appendString(append(b, `{"X":`...), string(v)), '}')
	}
	return append(b, `{"NULL":true}`...)
}

// appendString writes s as a JSON string, as encoding/json does: a string
// of printable ASCII that needs no escape as it is, any other through
// encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// UnmarshalJSON reads what MarshalJSON writes. Unknown forms become Other,
// so a malformed item is reported by the decoder, not lost here.
//
// encoding/json hands it valid JSON: it is split into members once
// (jsonobj), not checked and skipped again at each level, for an item
// may be large (a workflow's, with its definition). A member given twice
// keeps its last value, as encoding/json keeps a map's.
func (it *Item) UnmarshalJSON(b []byte) error {
	out := Item{}
	if err := jsonobj.Members(b, func(k string, v []byte) { out[k] = fromJSON(v) }); err != nil {
		return fmt.Errorf("an item: %w", err)
	}
	*it = out
	return nil
}

func fromJSON(r []byte) Value {
	// One tag, its last value: a tag given twice is one tag.
	var tag string
	var body []byte
	tags := 0
	if err := jsonobj.Members(r, func(k string, v []byte) {
		if tags == 0 || k != tag {
			tags++
		}
		tag, body = k, v
	}); err != nil || tags != 1 {
		return Other("an unreadable value")
	}
	switch tag {
	case "S":
		if s, ok := jsonString(body); ok {
			return S(s)
		}
	case "N":
		if s, ok := jsonString(body); ok {
			return N(s)
		}
	case "BOOL":
		var b bool
		if json.Unmarshal(body, &b) == nil {
			return Bool(b)
		}
	case "L":
		out := L{}
		if jsonobj.Elements(body, func(e []byte) { out = append(out, fromJSON(e)) }) == nil {
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
		if s, ok := jsonString(body); ok {
			return Other(s)
		}
	}
	return Other(fmt.Sprintf("an unreadable %s value", tag))
}

// jsonString reads a JSON string value (which the caller knows to be
// valid JSON): one without escapes and in valid UTF-8 is its bytes
// between the quotes, any other is decoded by encoding/json, which also
// refuses what is not a string.
func jsonString(body []byte) (string, bool) {
	if n := len(body); n >= 2 && body[0] == '"' && body[n-1] == '"' {
		plain := true
		for _, c := range body[1 : n-1] {
			if c == '\\' || c == '"' || c < 0x20 {
				plain = false
				break
			}
		}
		if plain && utf8.Valid(body[1:n-1]) {
			return string(body[1 : n-1]), true
		}
	}
	var s string
	if json.Unmarshal(body, &s) != nil {
		return "", false
	}
	return s, true
}
