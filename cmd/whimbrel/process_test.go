package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/state"
)

// processStore names the run, among a test's stores, on the embedded
// store with a whimbrel-run process per activity.
const processStore = "sqlite, process"

// withProcess adds processStore to stores: whimbrel run supervises
// inline by default, and --supervise process must keep working end to
// end too.
func withProcess(stores map[string][]string) map[string][]string {
	stores[processStore] = []string{"WHIMBREL_SUPERVISE=process"}
	return stores
}

// checkSupervised checks that every activity of execution id that was
// launched was launched as the run named name supervises: under a
// whimbrel-run process each (pid:) for processStore, inline otherwise.
func checkSupervised(t *testing.T, st state.Store, name, id string) {
	t.Helper()
	want := "inline:"
	if name == processStore {
		want = "pid:"
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	acts, err := st.Activities(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	launched := 0
	for _, a := range acts {
		if a.LaunchedAs == "" {
			continue // not launched: a map, or cancelled before its launch
		}
		launched++
		if !strings.HasPrefix(a.LaunchedAs, want) {
			t.Errorf("%s was launched as %q, want %s…", a.ActivityExecID, a.LaunchedAs, want)
		}
	}
	if launched == 0 {
		t.Errorf("no activity of %s was launched", id)
	}
}
