package main

import (
	"strings"
	"testing"
)

// TestTailKeepsTheCrash: a run that crashed is reported with its panic
// and the top of its stack, not only with the bottom of a long stack.
func TestTailKeepsTheCrash(t *testing.T) {
	stack := strings.Repeat("github.com/whimbrel/whimbrel/wrapper.(*run).run(...)\n\twrapper/run.go:200 +0x29b\n", 40)
	s := "a warning\npanic: runtime error: invalid memory address or nil pointer dereference\n\ngoroutine 7 [running]:\n" + stack + "created by launchInline\n"
	got := tail(s)
	for _, want := range []string{"panic: runtime error: invalid memory address", "goroutine 7 [running]", "created by launchInline"} {
		if !strings.Contains(got, want) {
			t.Errorf("tail does not keep %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "a warning") {
		t.Errorf("tail keeps what came before the crash:\n%s", got)
	}
	if long := strings.Repeat("x", 1000); tail(long) != "…"+long[600:] {
		t.Errorf("tail of a report without a crash: %q", tail(long))
	}
}
