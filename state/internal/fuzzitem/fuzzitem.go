// Package fuzzitem turns fuzz input into items of any shape: the attributes
// Whimbrel reads and others, each of any of DynamoDB's types with values
// that are sometimes right, sometimes nearly right and sometimes junk. The
// stores' fuzz targets write them in their own form and decode them.
package fuzzitem

// The value types besides string (S), bool (BOOL), nil (NULL), []any (L),
// []string (SS) and map[string]any (M).
type (
	Num       string   // N
	NumSet    []string // NS
	Binary    []byte   // B
	BinarySet [][]byte // BS
)

// Names are the attributes the decoders read.
var Names = []string{
	"activity_exec_id", "workflow_exec_id", "workflow_name", "activity_name", "state",
	"state_time", "state_time_epoch", "queued_time", "queued_time_epoch", "start_time", "start_time_epoch",
	"end_time", "end_time_epoch", "heartbeat_enabled", "heartbeat_time", "heartbeat_time_epoch",
	"heartbeat_interval", "heartbeat_timeout", "pending_dependencies", "owner", "attempt", "host", "pid",
	"launched_as", "exit_code", "signal", "error", "reason", "expires_at", "event_cursor",
	"workflow_request_id", "when", "when_epoch", "source", "manual", "outcome", "outcome_reason",
	"processed_time", "processed_time_epoch", "activity_event_id", "transition", "lambda", "definition",
	"registered_time", "registered_time_epoch", "activity_exec_dependency", "dependent_activity_exec_id",
	"object_id", "object_type", "version", "description",
}

var strs = []string{
	"", "RUNNING", "READY", "QUEUED", "COMPLETED", "TIMED_OUT", "SLEEPING", "HEARTBEAT", "applied",
	"a::0b0e3c0f-5d7a-4d8e-9c43-0f6b2d7c9a51", "w::1b0e3c0f-5d7a-4d8e-9c43-0f6b2d7c9a51", "w", "a::1",
	"evil\x1b[2J::0b0e3c0f-5d7a-4d8e-9c43-0f6b2d7c9a51", "\xff\xfe", "table",
}

var nums = []string{
	"0", "-1", "1", "1.5", "2026", "13", "60.999", "61", "1e300", "-1e300", "NaN", "Inf", "abc", "",
	"1795300000.5", "1795300000500", "2147483648", "0.0001", "100000000000",
}

// reader hands out the fuzz input a byte at a time, then zeros.
type reader struct {
	b []byte
	i int
}

func (r *reader) next() int {
	if r.i >= len(r.b) {
		return 0
	}
	r.i++
	return int(r.b[r.i-1])
}

func (r *reader) str() string {
	if n := r.next(); n%4 != 0 {
		return strs[n%len(strs)]
	}
	n := r.next() % 16
	out := make([]byte, 0, n)
	for range n {
		out = append(out, byte(r.next()))
	}
	return string(out)
}

func (r *reader) num() string {
	if n := r.next(); n%3 != 0 {
		return nums[n%len(nums)]
	}
	return string(rune('0'+r.next()%10)) + string(rune('0'+r.next()%10))
}

func (r *reader) value(depth int) any {
	kinds := 10
	if depth >= 3 {
		kinds = 4 // no more nesting
	}
	switch r.next() % kinds {
	case 0:
		return r.str()
	case 1:
		return Num(r.num())
	case 2:
		return r.next()%2 == 0
	case 3:
		return nil
	case 4, 5: // lists are times, mostly
		n := r.next() % 8
		l := make([]any, 0, n)
		for range n {
			if r.next()%4 == 0 {
				l = append(l, r.value(depth+1))
			} else {
				l = append(l, Num(r.num()))
			}
		}
		return l
	case 6:
		n := 1 + r.next()%3
		ss := make([]string, 0, n)
		for range n {
			ss = append(ss, r.str())
		}
		return ss
	case 7:
		m := map[string]any{}
		for range r.next() % 3 {
			m[r.str()] = r.value(depth + 1)
		}
		return m
	case 8:
		return NumSet{r.num()}
	default:
		if r.next()%2 == 0 {
			return Binary(r.str())
		}
		return BinarySet{Binary(r.str())}
	}
}

// Item builds an item from fuzz input. Most items are near misses of a
// real one: they start from a valid activity and change some attributes.
func Item(data []byte) map[string]any {
	r := &reader{b: data}
	it := map[string]any{}
	if r.next()%2 == 0 {
		it["activity_exec_id"] = "a::0b0e3c0f-5d7a-4d8e-9c43-0f6b2d7c9a51"
		it["workflow_exec_id"] = "w::1b0e3c0f-5d7a-4d8e-9c43-0f6b2d7c9a51"
		it["state"] = "RUNNING"
		it["state_time_epoch"] = Num("1795300000.5")
	}
	for range r.next() % 24 {
		name := Names[r.next()%len(Names)]
		if r.next()%16 == 0 {
			name = r.str()
		}
		if r.next()%8 == 0 {
			delete(it, name)
			continue
		}
		it[name] = r.value(0)
	}
	return it
}
