package dynamodb

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/internal/attr"
)

// docs/contract.md states the contract for people who write clients in
// other languages. These tests keep it complete: every table, index,
// attribute and state that the state package and this store define is
// named there, and its transition tables are exactly the state package's.
// The names are read from the code (the table definitions, the codec's
// encoding of fully populated items, the state lists), never from a list
// kept by hand.

const contractDoc = "../../docs/contract.md"

func readContractDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(contractDoc)
	if err != nil {
		t.Fatalf("read the contract: %v", err)
	}
	return string(b)
}

// codeNames returns the text of every inline code span of a Markdown page:
// a name counts as named when it is written as code, `like_this`.
func codeNames(doc string) map[string]bool {
	names := map[string]bool{}
	for _, m := range regexp.MustCompile("`([^`\n]+)`").FindAllStringSubmatch(doc, -1) {
		names[m[1]] = true
	}
	return names
}

// contractNames lists what the contract page must name, by kind.
func contractNames(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	add := func(kind string, names ...string) {
		for _, n := range names {
			if n != "" && !slices.Contains(out[kind], n) {
				out[kind] = append(out[kind], n)
			}
		}
	}
	for _, td := range tableDefs {
		add("table", td.base)
		add("attribute", td.hash.name)
		if td.rng != nil {
			add("attribute", td.rng.name)
		}
		for _, ix := range td.indexes {
			add("index", ix.name)
			add("attribute", ix.hash.name)
			if ix.rng != nil {
				add("attribute", ix.rng.name)
			}
			add("attribute", ix.include...)
		}
	}
	// The unsharded index older installs still have, and the store's own
	// attributes.
	add("index", indexLegacyState)
	add("attribute", AttrStateShard, AttrNameShard, attr.ExpiresAt)

	// Every attribute the codec writes, read off fully populated items.
	items := []attr.Item{
		attr.EncodeWorkflow(populated[state.WorkflowExec](t)),
		attr.EncodeRequest(populated[state.WorkflowRequest](t)),
		attr.EncodeEvent(populated[state.ActivityEvent](t)),
		attr.EncodeActivity(populated[state.ActivityExec](t)),
		attr.EncodeDependency(populated[state.Dependency](t)),
		attr.EncodeInstallStatus(populated[state.InstallStatus](t)),
		attr.EncodeRegistration(populated[state.WorkflowLambda](t)),
		attr.EncodeSchedule(populated[state.Schedule](t)),
		attr.EncodeToken("nightly", "etl::x", time.Now()),
		attr.EncodePool(populated[state.Pool](t)),
		attr.EncodePoolShard(populated[state.PoolShard](t)),
		attr.EncodeNotification(populated[state.Notification](t)),
	}
	for _, it := range items {
		for k := range it {
			add("attribute", k)
		}
	}
	for _, s := range state.ActivityStates {
		add("activity state", string(s))
	}
	for _, s := range state.WorkflowStates {
		add("workflow state", string(s))
	}
	add("transition", state.TransitionCancel, state.TransitionHeartbeat)
	add("outcome", state.OutcomeStarted, state.OutcomeApplied, state.OutcomeRejected, state.OutcomeIgnored)
	add("schedule entry", attr.EntrySchedule)
	add("notification state", string(state.NotificationPending), string(state.NotificationDelivered),
		string(state.NotificationUndeliverable), string(state.NotificationWatching), string(state.NotificationDone))
	for kind := range out {
		sort.Strings(out[kind])
	}
	return out
}

// populated returns a T whose every field holds a value that is not the
// zero value, so that an encoder writes every attribute it knows. A field
// added to an item type is covered without touching this test.
func populated[T any](t *testing.T) *T {
	t.Helper()
	v := new(T)
	fill(t, reflect.ValueOf(v).Elem(), reflect.TypeFor[T]().Name())
	return v
}

func fill(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	now := time.Date(2026, 11, 21, 3, 4, 5, 0, time.UTC)
	switch v.Type() {
	case reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(now))
		return
	case reflect.TypeFor[time.Duration]():
		v.Set(reflect.ValueOf(time.Minute))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Int:
		v.SetInt(1)
	case reflect.Int64: // a duration of another name (state.Interval)
		v.SetInt(int64(time.Minute))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), path)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(t, v.Index(0), path+"[0]")
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(t, k, path+" key")
		fill(t, e, path+" value")
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i), path+"."+v.Type().Field(i).Name)
			}
		}
	default:
		t.Fatalf("%s: cannot populate a %s: teach fill this kind", path, v.Type())
	}
}

// missingNames returns, by kind, the names doc does not write as code.
func missingNames(doc string, names map[string][]string) []string {
	have := codeNames(doc)
	var missing []string
	for kind, list := range names {
		for _, n := range list {
			if !have[n] {
				missing = append(missing, fmt.Sprintf("%s %q", kind, n))
			}
		}
	}
	sort.Strings(missing)
	return missing
}

// TestContractDocNamesEverything fails when the code defines a table,
// index, attribute, state, transition word or outcome that
// docs/contract.md does not name: document it there (in its table's
// section, and under "What Whimbrel adds" if a base-contract client need
// not know it).
func TestContractDocNamesEverything(t *testing.T) {
	names := contractNames(t)
	for kind, min := range map[string]int{"table": 9, "index": 7, "attribute": 80, "activity state": 10, "workflow state": 5} {
		if len(names[kind]) < min {
			t.Errorf("only %d names of kind %q read from the code (%v), want at least %d: is the test still reading them?", len(names[kind]), kind, names[kind], min)
		}
	}
	for _, m := range missingNames(readContractDoc(t), names) {
		t.Errorf("docs/contract.md does not name %s: document it", m)
	}
}

// TestContractDocCheckFailsWhenANameIsMissing proves the check above can
// fail: with any one name taken out of the page, it is reported.
func TestContractDocCheckFailsWhenANameIsMissing(t *testing.T) {
	doc := readContractDoc(t)
	names := contractNames(t)
	for kind, list := range names {
		for _, n := range list {
			without := strings.ReplaceAll(doc, "`"+n+"`", "`(removed)`")
			want := fmt.Sprintf("%s %q", kind, n)
			if !slices.Contains(missingNames(without, names), want) {
				t.Errorf("with %s taken out of the page, the check does not report it", want)
			}
		}
	}
}

// transitionRows reads the Markdown table that follows heading in doc:
// each row's first cell lists states (as code) and its second the states
// they may move to (as code, or "—" for none).
func transitionRows(t *testing.T, doc, heading string) map[string][]string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/contract.md has no heading %q", heading)
	}
	code := regexp.MustCompile("`([A-Z_]+)`")
	rows := map[string][]string{}
	inTable := false
	for _, line := range strings.Split(rest, "\n") {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 2 || strings.Contains(cells[0], "---") || strings.TrimSpace(cells[0]) == "from" {
			continue
		}
		var to []string
		for _, m := range code.FindAllStringSubmatch(cells[1], -1) {
			to = append(to, m[1])
		}
		sort.Strings(to)
		for _, m := range code.FindAllStringSubmatch(cells[0], -1) {
			if _, dup := rows[m[1]]; dup {
				t.Errorf("%s: state %s has two rows", heading, m[1])
			}
			rows[m[1]] = to
		}
	}
	return rows
}

// legalMoves asks the state package, state by state, which moves it allows.
func legalMoves[S ~string](states []S, check func(from, to S) error) map[string][]string {
	out := map[string][]string{}
	for _, from := range states {
		var to []string
		for _, next := range states {
			if check(from, next) == nil {
				to = append(to, string(next))
			}
		}
		sort.Strings(to)
		out[string(from)] = to
	}
	return out
}

// TestContractDocTransitionsAreTheCodes fails when the transition tables
// of docs/contract.md differ from the moves the state package allows: a
// row missing, a move the code refuses, or one it allows that the page
// does not list.
func TestContractDocTransitionsAreTheCodes(t *testing.T) {
	doc := readContractDoc(t)
	for _, tc := range []struct {
		heading string
		want    map[string][]string
	}{
		{"### Transitions", legalMoves(state.ActivityStates, state.CheckTransition)},
		{"## Workflow states", legalMoves(state.WorkflowStates, state.CheckWorkflowTransition)},
	} {
		got := transitionRows(t, doc, tc.heading)
		if diff := diffMoves(got, tc.want); diff != "" {
			t.Errorf("the table under %q in docs/contract.md is not the state package's:\n%s", tc.heading, diff)
		}
	}
}

// TestContractDocTransitionCheckFails proves the comparison can fail: a
// move added to a row, and a row taken out, are both reported.
func TestContractDocTransitionCheckFails(t *testing.T) {
	doc := readContractDoc(t)
	want := legalMoves(state.ActivityStates, state.CheckTransition)
	for name, edit := range map[string]func(string) string{
		"a move added": func(d string) string {
			return strings.Replace(d, "| `FAILED` | — |", "| `FAILED` | `READY` |", 1)
		},
		"a row taken out": func(d string) string {
			return strings.Replace(d, "| `PREPARING` | `CANCELLED`, `RUNNING`, `FAILED` |\n", "", 1)
		},
	} {
		edited := edit(doc)
		if edited == doc {
			t.Fatalf("%s: the edit changed nothing: has the table's layout changed?", name)
		}
		if diffMoves(transitionRows(t, edited, "### Transitions"), want) == "" {
			t.Errorf("%s: not reported", name)
		}
	}
}

func diffMoves(got, want map[string][]string) string {
	var b strings.Builder
	for from, to := range want {
		g, ok := got[from]
		switch {
		case !ok:
			fmt.Fprintf(&b, "  no row for %s (want %v)\n", from, to)
		case !slices.Equal(g, to):
			fmt.Fprintf(&b, "  %s → %v, want %v\n", from, g, to)
		}
	}
	for from := range got {
		if _, ok := want[from]; !ok {
			fmt.Fprintf(&b, "  a row for %s, which is no state\n", from)
		}
	}
	return b.String()
}
