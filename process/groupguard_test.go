//go:build linux

package process

import (
	"strings"
	"testing"
	"time"
)

// TestReadGroups: the group guard keeps the groups named and not
// released; "q" is a quiet end, end of file the supervisor's death; a
// line that breaks the protocol is skipped and said.
func TestReadGroups(t *testing.T) {
	groups, quit, err := readGroups(strings.NewReader("+100 2s\n+200 5s\n-100\n+1 1s\n+300 1s"))
	if quit || err == nil || len(groups) != 1 || groups[200] != 5*time.Second {
		t.Errorf("groups %v, quit %v, err %v: want 200 (5s) alone, not quit, and the line naming group 1 refused", groups, quit, err)
	}
	groups, quit, err = readGroups(strings.NewReader("+100 2s\nq\n+200 1s\n"))
	if !quit || err != nil || len(groups) != 1 {
		t.Errorf("groups %v, quit %v, err %v: want a quiet end", groups, quit, err)
	}
}
