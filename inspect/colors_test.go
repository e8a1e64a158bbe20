package inspect

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestColorsFor(t *testing.T) {
	for _, tc := range []struct {
		name string
		tty  bool
		env  map[string]string
		want bool
	}{
		{"a terminal", true, nil, true},
		{"not a terminal", false, nil, false},
		{"NO_COLOR set", true, map[string]string{"NO_COLOR": "1"}, false},
		{"NO_COLOR empty counts as unset", true, map[string]string{"NO_COLOR": ""}, true},
		{"a dumb terminal", true, map[string]string{"TERM": "dumb"}, false},
	} {
		got := colorsFor(tc.tty, func(k string) string { return tc.env[k] })
		if got.On != tc.want {
			t.Errorf("%s: colours %v, want %v", tc.name, got.On, tc.want)
		}
	}
	if s := (Colors{}).State("FAILED"); s != "FAILED" {
		t.Errorf("no colours painted %q", s)
	}
}

// TestStatusColorsKeepColumns: painted states do not shift the columns.
func TestStatusColorsKeepColumns(t *testing.T) {
	now := time.Now()
	s := &Status{Workflow: Workflow{ID: "w::1", State: "RUNNING", Started: &now},
		Activities: []Activity{{Name: "a", State: "COMPLETED"}, {Name: "b", State: "RUNNING", Depth: 1, DependsOn: []string{"a"}}}}
	var plain, painted bytes.Buffer
	if err := s.WriteText(&plain); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteTextColors(&painted, Colors{On: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(painted.String(), "\x1b[32mCOMPLETED\x1b[0m") || strings.Contains(plain.String(), "\x1b") {
		t.Errorf("colours: painted %q, plain %q", painted.String(), plain.String())
	}
	unpainted := strings.NewReplacer("\x1b[32m", "", "\x1b[33m", "", "\x1b[0m", "").Replace(painted.String())
	if unpainted != plain.String() {
		t.Errorf("painting moved the text:\n%s\nwant:\n%s", unpainted, plain.String())
	}
	if !strings.Contains(plain.String(), "\n  b ") {
		t.Errorf("b is not indented under a:\n%s", plain.String())
	}
}
