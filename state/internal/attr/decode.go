package attr

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/whimbrel/whimbrel/state"
)

// decoder reads one item, remembering the first problem so that a decode
// function can read every field and check once.
type decoder struct {
	table string
	key   string
	id    string
	m     Item
	err   error
}

// newDecoder starts reading an item whose key attributes are keyAttrs
// (hash key first). A key attribute that holds a control character or is
// not UTF-8 makes the item malformed at once: such an ID is no client's,
// and would drive the terminal of whoever reads it.
func newDecoder(table string, m Item, keyAttrs ...string) *decoder {
	d := &decoder{table: table, m: m}
	for i, k := range keyAttrs {
		if s, ok := m[k].(S); ok {
			if d.key != "" {
				d.key += " / "
			}
			d.key += string(s)
			if i == 0 {
				d.id = string(s)
			}
		}
	}
	for _, k := range keyAttrs {
		if s, ok := m[k].(S); ok && !cleanID(string(s)) {
			d.fail(k, "%q holds a control character or is not UTF-8", string(s))
		}
	}
	return d
}

// cleanID reports whether an ID is printable UTF-8.
func cleanID(s string) bool {
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

func (d *decoder) fail(attr, format string, args ...any) {
	if d.err == nil {
		e := &state.DecodeError{Table: d.table, Key: d.key, ID: d.id, Attr: attr, Err: fmt.Sprintf(format, args...)}
		if s, ok := d.m["state"].(S); ok {
			e.State = string(s)
		}
		d.err = e
	}
}

func typeName(v Value) string {
	if v == nil {
		return "NULL"
	}
	return v.kind()
}

// str reads a String; a required one must be present and non-empty.
func (d *decoder) str(attr string, required bool) string {
	v, ok := d.m[attr]
	if !ok {
		if required {
			d.fail(attr, "missing (want a String)")
		}
		return ""
	}
	s, ok := v.(S)
	if !ok {
		d.fail(attr, "is %s, want a String", typeName(v))
		return ""
	}
	if required && s == "" {
		d.fail(attr, "is empty")
	}
	return string(s)
}

func (d *decoder) number(attr string) (float64, bool) {
	v, ok := d.m[attr]
	if !ok {
		return 0, false
	}
	n, ok := v.(N)
	if !ok {
		d.fail(attr, "is %s, want a Number", typeName(v))
		return 0, false
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		d.fail(attr, "%q is not a number", string(n))
		return 0, false
	}
	return f, true
}

// integer reads a whole Number that fits an int32-sized range.
func (d *decoder) integer(attr string) (int, bool) {
	f, ok := d.number(attr)
	if !ok {
		return 0, false
	}
	if f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
		d.fail(attr, "%v is not a whole number in range", f)
		return 0, false
	}
	return int(f), true
}

func (d *decoder) seconds(attr string) time.Duration {
	f, ok := d.number(attr)
	if !ok {
		return 0
	}
	if f < 0 || f > 1e9 {
		d.fail(attr, "%v seconds is out of range", f)
		return 0
	}
	return time.Duration(f * float64(time.Second))
}

func (d *decoder) boolean(attr string) bool {
	v, ok := d.m[attr]
	if !ok {
		return false
	}
	b, ok := v.(Bool)
	if !ok {
		d.fail(attr, "is %s, want a Boolean", typeName(v))
		return false
	}
	return bool(b)
}

func (d *decoder) stringSet(attr string) []string {
	v, ok := d.m[attr]
	if !ok {
		return nil
	}
	ss, ok := v.(SS)
	if !ok {
		d.fail(attr, "is %s, want a String Set", typeName(v))
		return nil
	}
	out := append([]string(nil), ss...)
	sort.Strings(out)
	return out
}

// time reads name_epoch, or the list when only that was written. A
// negative epoch means "not set" (docs/contract.md#times).
func (d *decoder) time(name string) time.Time {
	if f, ok := d.number(name + "_epoch"); ok {
		if f < 0 {
			return time.Time{}
		}
		t, err := state.ParseEpoch(strconv.FormatFloat(f, 'f', -1, 64))
		if err != nil {
			d.fail(name+"_epoch", "%v", err)
		}
		return t
	}
	v, ok := d.m[name]
	if !ok {
		return time.Time{}
	}
	l, ok := v.(L)
	if !ok {
		d.fail(name, "is %s, want a List [year, month, day, hour, minute, second]", typeName(v))
		return time.Time{}
	}
	if len(l) != 6 {
		d.fail(name, "has %d elements, want 6: [year, month, day, hour, minute, second]", len(l))
		return time.Time{}
	}
	var tl state.TimeList
	for i, e := range l {
		n, ok := e.(N)
		if !ok {
			d.fail(name, "element %d is %s, want a Number", i, typeName(e))
			return time.Time{}
		}
		f, err := strconv.ParseFloat(string(n), 64)
		if err != nil {
			d.fail(name, "element %d %q is not a number", i, string(n))
			return time.Time{}
		}
		tl[i] = f
	}
	t, err := tl.Time()
	if err != nil {
		d.fail(name, "%v", err)
	}
	return t
}

// expires reads the TTL attribute: whole epoch seconds.
func (d *decoder) expires() time.Time {
	f, ok := d.number(ExpiresAt)
	if !ok || f <= 0 {
		return time.Time{}
	}
	if f > 1e11 {
		d.fail(ExpiresAt, "%v seconds is out of range", f)
		return time.Time{}
	}
	return time.Unix(int64(f), 0).UTC()
}

func (d *decoder) activityState(attr string) state.ActivityState {
	s := state.ActivityState(d.str(attr, true))
	if d.err == nil && !s.Valid() {
		d.fail(attr, "%q is not an activity state", string(s))
	}
	return s
}

func (d *decoder) workflowState(attr string) state.WorkflowState {
	s := state.WorkflowState(d.str(attr, true))
	if d.err == nil && !s.Valid() {
		d.fail(attr, "%q is not a workflow state", string(s))
	}
	return s
}
