package main

import (
	"fmt"
	"strings"

	"github.com/whimbrel/whimbrel/definition"
)

// trueActivities is a workflow named name of n independent activities
// that run `true`, named by idFmt and their index (e.g. "a%03d"): what
// the start, CPU and throughput measurements launch.
func trueActivities(name, idFmt string, n int) (*definition.Workflow, error) {
	return definition.Parse(name+".yaml", []byte(trueYAML(name, idFmt, n)))
}

// trueYAML is trueActivities' definition as text, for a build's own
// `whimbrel start`.
func trueYAML(name, idFmt string, n int) string {
	var def strings.Builder
	fmt.Fprintf(&def, "name: %s\nactivities:\n", name)
	for i := range n {
		fmt.Fprintf(&def, "  "+idFmt+": {command: [\"true\"]}\n", i)
	}
	return def.String()
}
