package definition

import (
	"strings"
	"testing"
)

func TestConcurrencyParse(t *testing.T) {
	d, err := Parse("w.yaml", []byte("name: w\nconcurrency:\n  max_active_runs: 2\nactivities:\n  a: {command: [true]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d.MaxActiveRuns() != 2 {
		t.Fatalf("max_active_runs %d, want 2", d.MaxActiveRuns())
	}
	back, err := FromJSON(d.JSON())
	if err != nil || back.MaxActiveRuns() != 2 {
		t.Fatalf("stored and read back: %v, max_active_runs %d", err, back.MaxActiveRuns())
	}
	none, err := Parse("w.yaml", []byte("name: w\nactivities:\n  a: {command: [true]}\n"))
	if err != nil || none.MaxActiveRuns() != 0 {
		t.Fatalf("no concurrency: %v, %d", err, none.MaxActiveRuns())
	}
}

func TestConcurrencyErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"concurrency:\n  max_active_runs: 0\n", `w.yaml:3: concurrency: max_active_runs "0"`},
		{"concurrency:\n  max_active_runs: lots\n", `w.yaml:3: concurrency: max_active_runs "lots"`},
		{"concurrency:\n  max_active_runs: 10001\n", `w.yaml:3: concurrency: max_active_runs "10001"`},
		{"concurrency:\n  max_runs: 1\n", `w.yaml:3: concurrency: unknown field "max_runs"`},
		{"concurrency: 1\n", `w.yaml:2: concurrency must be a mapping`},
	} {
		_, err := Parse("w.yaml", []byte("name: w\n"+tc.yaml+"activities:\n  a: {command: [true]}\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
