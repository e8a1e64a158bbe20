package main

import (
	"strings"
	"testing"

	"github.com/whimbrel/whimbrel/state/storetest"
)

// TestCommandEnvironment: the command gets the variables it is meant to
// read, its identity and data files, the run's parameters, where the state
// is, and everything not Whimbrel's; not the web view's token nor the
// variables that configure the wrapper or wire it to its launcher, however
// they reached the wrapper.
func TestCommandEnvironment(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.DAG{"a": nil})
	f.queue(t, "a")
	secret := "s3cr3t-web-token-value"
	w := run(t, f.env(t, "a",
		"WHIMBREL_WEB_TOKEN="+secret,
		"WHIMBREL_LAUNCHER_NUDGE=127.0.0.1:9",
		"WHIMBREL_KILL_GRACE=3s",
		"WHIMBREL_HEARTBEAT_INTERVAL=5s",
		"WHIMBREL_HEARTBEAT_TIMEOUT=20s",
		"WHIMBREL_TIMEOUT=1m",
		"WHIMBREL_LOG_LEVEL=info",
		"WHIMBREL_LOG_FORMAT=text",
		"WHIMBREL_API=full",
		"WHIMBREL_GUARD=true",
		"WHIMBREL_SIGNAL_CHILD_ONLY=false",
		"WHIMBREL_DATA_DIR="+t.TempDir(),
		"WHIMBREL_STORE_TIMEOUT=30s",
		"WHIMBREL_PARAM_DAY=mon",
		"SOMETHING_ELSE=kept",
	), "--", "env")
	if w.code != 0 {
		t.Fatalf("exit %d\n%s", w.code, w.stderr.String())
	}
	got := map[string]string{}
	for _, line := range strings.Split(w.stdout.String(), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			got[k] = v
		}
	}
	allowed := map[string]bool{"WHIMBREL_ACTIVITY_EXEC_ID": true, "WHIMBREL_ACTIVITY_NAME": true, "WHIMBREL_WORKFLOW_EXEC_ID": true,
		"WHIMBREL_WORKFLOW_NAME": true, "WHIMBREL_INPUTS": true, "WHIMBREL_OUTPUT": true, "WHIMBREL_PROGRESS": true,
		"WHIMBREL_STORE": true, "WHIMBREL_TABLE_PREFIX": true, "WHIMBREL_SCHEDULE": true, "WHIMBREL_FIRE_TIME": true}
	for k := range got {
		if strings.HasPrefix(k, "WHIMBREL_") && !allowed[k] && !strings.HasPrefix(k, "WHIMBREL_PARAM_") {
			t.Errorf("the command's environment has %s", k)
		}
	}
	if strings.Contains(w.stdout.String(), secret) {
		t.Errorf("the web token's value reached the command:\n%s", w.stdout.String())
	}
	k := f.key("a")
	for name, want := range map[string]string{"WHIMBREL_ACTIVITY_EXEC_ID": k.ActivityExecID, "WHIMBREL_WORKFLOW_EXEC_ID": k.WorkflowExecID,
		"WHIMBREL_ACTIVITY_NAME": "a", "WHIMBREL_WORKFLOW_NAME": "wf", "WHIMBREL_PARAM_DAY": "mon", "SOMETHING_ELSE": "kept"} {
		if got[name] != want {
			t.Errorf("%s=%q, want %q", name, got[name], want)
		}
	}
	for _, name := range []string{"WHIMBREL_INPUTS", "WHIMBREL_OUTPUT", "WHIMBREL_PROGRESS"} {
		if got[name] == "" {
			t.Errorf("the command's environment lacks %s", name)
		}
	}
}
