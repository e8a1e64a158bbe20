package attr

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"
)

// mapsJSON is the item's JSON as encoding/json writes it from maps: the
// form the SQLite store has always kept, which MarshalJSON must write byte
// for byte.
func mapsJSON(t *testing.T, it Item) []byte {
	t.Helper()
	var conv func(v Value) any
	conv = func(v Value) any {
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
				out[i] = conv(e)
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
	m := map[string]any{}
	for k, v := range it {
		m[k] = conv(v)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// hostile are strings a stranger may put in an item: escapes, HTML,
// control characters, terminal escapes, invalid UTF-8, quotes.
var hostile = []string{"", "plain", `<script>alert("x")</script>`, "a\x1b[31mred\x1b[0m", "tab\there\nnew", `back\slash`,
	"\xff\xfe not utf-8", "é ü 中文 \u2028 \u2029", "&amp;", `"quoted"`, "\x00nul", "~\x7f"}

// TestItemJSONAsEncodingJSON: the item codec writes what encoding/json
// writes of the same item as maps, and reads back what encoding/json
// would, for every kind of value and hostile strings in keys and values.
func TestItemJSONAsEncodingJSON(t *testing.T) {
	for i, s := range hostile {
		it := Item{
			"s" + s: S(s), "n": N("12.5"), "b": Bool(i%2 == 0), "null": Null{}, "x": Other(s),
			"l": L{S(s), N("1"), L{Bool(true)}, Null{}}, "ss": SS{s, "b", "a"}, "empty_ss": SS{}, "empty_l": L{},
			s: S("key " + s),
		}
		got, err := json.Marshal(it) // as the store calls it
		if err != nil {
			t.Fatal(err)
		}
		if want := mapsJSON(t, it); string(got) != string(want) {
			t.Fatalf("item %d:\ngot  %s\nwant %s", i, got, want)
		}
		var back Item
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatal(err)
		}
		// What a string reads back as is what encoding/json reads.
		var generic map[string]map[string]any
		if err := json.Unmarshal(got, &generic); err != nil {
			t.Fatal(err)
		}
		for k, v := range generic {
			if str, ok := v["S"].(string); ok && back[k] != S(str) {
				t.Fatalf("item %d, %q: read %#v, encoding/json reads %q", i, k, back[k], str)
			}
		}
		if len(back) != len(it) {
			t.Fatalf("item %d: read %d attributes of %d", i, len(back), len(it))
		}
	}
}

// TestItemJSONReadsForeignForms: what another client wrote (escapes where
// none were needed, a tag twice, a member twice, unknown tags) reads as
// encoding/json would read it.
func TestItemJSONReadsForeignForms(t *testing.T) {
	for raw, want := range map[string]Item{
		`{"a":{"S":"\u0041\n"}}`:                    {"a": S("A\n")},
		`{"a":{"S":"x"},"a":{"S":"y"}}`:             {"a": S("y")},
		`{"a":{"S":"x","S":"y"}}`:                   {"a": S("y")},
		`{"a":{"S":"x","N":"1"}}`:                   {"a": Other("an unreadable value")},
		`{"a":{"N":1}}`:                             {"a": Other("an unreadable N value")},
		`{"a":{"M":{}}}`:                            {"a": Other("a Map")},
		`{"a": {"S" : "sp aced" } }`:                {"a": S("sp aced")},
		`{"a":{"L":[{"S":"\"q\""},{"NULL":true}]}}`: {"a": L{S(`"q"`), Null{}}},
		"{\"a\":{\"S\":\"\xff\"}}":                  {"a": S("\ufffd")},
	} {
		var got Item
		if err := json.Unmarshal([]byte(raw), &got); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %#v, want %#v", raw, got, want)
		}
	}
}

func BenchmarkItemJSON(b *testing.B) {
	it := Item{}
	for i := 0; i < 25; i++ {
		it[fmt.Sprintf("attribute_%02d", i)] = S(fmt.Sprintf("w::0b0e3c0f-5d7a-4d8e-9c43-0f6b2d7c9a%02d", i))
	}
	it["state_time"] = List(time.Date(2026, 11, 26, 21, 0, 0, 0, time.UTC))
	raw, _ := json.Marshal(it)
	b.Run("marshal", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			_, _ = json.Marshal(it)
		}
	})
	b.Run("unmarshal", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			var back Item
			_ = json.Unmarshal(raw, &back)
		}
	})
}
