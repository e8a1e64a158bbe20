package definition_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
)

const notifyHead = "name: n\nactivities:\n  a:\n    command: [\"true\"]\n"

// TestParseNotify: the notify list and the deadline are read, kept in the
// stored form, and each event is matched (timed_out also by failed).
func TestParseNotify(t *testing.T) {
	t.Parallel()
	d, err := definition.Parse("n.yaml", []byte(notifyHead+`notify:
  - on: [failed, deadline_missed]
    webhook: {url: "https://hooks.example.com/T0/B0", secret_env: HOOK_SECRET, format: slack}
  - on: [completed]
    eventbridge: {bus: default, source: whimbrel}
deadline: 2h
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Notify) != 2 || d.Notify[0].Webhook.URL != "https://hooks.example.com/T0/B0" || d.Notify[0].Webhook.Format != "slack" ||
		d.Notify[1].EventBridge.Bus != "default" || time.Duration(d.Deadline) != 2*time.Hour {
		t.Fatalf("read %+v deadline %s", d.Notify, time.Duration(d.Deadline))
	}
	if !d.Notify[0].Wants("timed_out") || d.Notify[0].Wants("completed") || !d.Notify[1].Wants("completed") {
		t.Error("events matched wrongly")
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	st, err := definition.ReadStored(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Notify()) != 2 || time.Duration(st.Deadline()) != 2*time.Hour {
		t.Errorf("stored form lost the notify list or the deadline: %+v %s", st.Notify(), time.Duration(st.Deadline()))
	}
}

// TestNotifyErrors: a bad URL, an unknown event, a missing or doubled
// target and a bad format are definition errors, each at its line.
func TestNotifyErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ yaml, want string }{
		{"notify:\n  - on: [failed]\n    webhook: {url: \"ftp://x/y\"}\n", "n.yaml:7: notify entry 1: webhook: url \"ftp://x/y\" must start with https://"},
		{"notify:\n  - on: [failed]\n    webhook: {url: \"https://\"}\n", "n.yaml:7: notify entry 1: webhook: url \"https://\" has no host"},
		{"notify:\n  - on: [faild]\n    webhook: {url: \"https://h/x\"}\n", "n.yaml:6: notify entry 1: on: unknown event \"faild\" (did you mean \"failed\"?)"},
		{"notify:\n  - on: [failed]\n", "n.yaml:6: notify entry 1: give exactly one of webhook"},
		{"notify:\n  - on: [failed]\n    webhook: {url: \"https://h/x\", format: xml}\n", "n.yaml:7: notify entry 1: webhook: format \"xml\" is not json or slack"},
		{"notify:\n  - on: [failed]\n    webhook: {url: \"https://h/x\", secrt_env: X}\n", "unknown field \"secrt_env\" (did you mean \"secret_env\"?)"},
		{"notify: {on: failed}\n", "n.yaml:5: notify must be a list"},
		{"deadline: soon\n", "n.yaml:5: the workflow: deadline \"soon\" is not a duration"},
	} {
		_, err := definition.Parse("n.yaml", []byte(notifyHead+c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.yaml, err, c.want)
		}
	}
}
