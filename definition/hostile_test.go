package definition_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
)

// TestParseSurvivesHostileYAML: inputs found by fuzzing that once crashed
// or hung the parser are answered, with an error, at once.
func TestParseSurvivesHostileYAML(t *testing.T) {
	var bomb strings.Builder
	bomb.WriteString("name: w\nx-0: &a0 {command: [x]}\n")
	for i := 1; i < 40; i++ {
		fmt.Fprintf(&bomb, "x-%d: &a%d {<<: [*a%d, *a%d]}\n", i, i, i-1, i-1)
	}
	bomb.WriteString("activities:\n  a: *a39\n")
	for name, in := range map[string]string{
		"merge into itself":     "name: w\nactivities:\n  a: &a {command: [true], <<: *a}\n",
		"merge bomb":            bomb.String(),
		"activities aliased in": "name: w\nactivities: &x\n  a: *x\n",
	} {
		done := make(chan error, 1)
		go func() { _, err := definition.Parse("x.yaml", []byte(in)); done <- err }()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s: accepted", name)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the parser hangs", name)
		}
	}
}

// TestParseRefusesControlCharacters: names with control characters (which
// would reach operators' terminals in ids) are refused, and the error shows
// them escaped.
func TestParseRefusesControlCharacters(t *testing.T) {
	for name, in := range map[string]string{
		"workflow name":   "name: \"w\\e[2J\"\nactivities:\n  a: {command: [true]}\n",
		"activity name":   "name: w\nactivities:\n  \"a\\e[2J\\a\": {command: [true]}\n",
		"a dependency":    "name: w\nactivities:\n  a: {command: [true]}\n  b: {command: [true], depends_on: [\"a\\e]0;x\\a\"]}\n",
		"the empty graph": "name: w\nactivities: {}\n",
	} {
		_, err := definition.Parse("x.yaml", []byte(in))
		if err == nil {
			t.Errorf("%s: accepted %q", name, in)
			continue
		}
		if strings.ContainsAny(err.Error(), "\x1b\a") {
			t.Errorf("%s: the error holds raw control characters: %q", name, err)
		}
	}
}
