package dynamodb_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestScheduleKit: the deployment kit fires schedules. The Lambda template
// has an EventBridge rule invoking the function every minute, with the
// permission to do so. What the policies grant on the schedule table (the
// monitor's, the processor's and the operator's, whose binaries fire and
// manage schedules) is checked, by action and resource, against what the
// binaries call by TestIAMPoliciesByResource in cmd/whimbrel; the
// function's role follows the processor's policy (TestLambdaTemplateRole).
func TestScheduleKit(t *testing.T) {
	b, err := os.ReadFile("../../examples/lambda/processor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tmpl struct {
		Resources map[string]struct {
			Type       string         `yaml:"Type"`
			Properties map[string]any `yaml:"Properties"`
		} `yaml:"Resources"`
	}
	if err := yaml.Unmarshal(b, &tmpl); err != nil {
		t.Fatal(err)
	}
	rules, permitted := 0, 0
	for name, r := range tmpl.Resources {
		switch r.Type {
		case "AWS::Events::Rule":
			rules++
			if r.Properties["ScheduleExpression"] != "rate(1 minute)" {
				t.Errorf("%s: ScheduleExpression %v, want rate(1 minute)", name, r.Properties["ScheduleExpression"])
			}
			if got := fmt.Sprint(r.Properties["Targets"]); !contains(got, "Processor.Arn") {
				t.Errorf("%s: targets %s, want the Processor function", name, got)
			}
		case "AWS::Lambda::Permission":
			if r.Properties["Principal"] == "events.amazonaws.com" && r.Properties["Action"] == "lambda:InvokeFunction" {
				permitted++
			}
		}
	}
	if rules != 1 || permitted != 1 {
		t.Errorf("%d EventBridge rules and %d permissions for events.amazonaws.com, want one of each", rules, permitted)
	}

}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
