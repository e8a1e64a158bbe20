package dynamodb_test

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestScheduleKit: the deployment kit fires schedules. The Lambda template
// has an EventBridge rule invoking the function every minute, with the
// permission to do so; the monitor's policy lets every monitor fire
// schedules; the operator's lets it delete one.
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

	needs := map[string]map[string][]string{
		"whimbrel-monitor": {
			"arn:aws:dynamodb:*:*:table/whimbrel_schedule":         {"dynamodb:GetItem", "dynamodb:PutItem"},
			"arn:aws:dynamodb:*:*:table/whimbrel_schedule/index/*": {"dynamodb:Query"},
			// starting a run: the request, the execution, its activities
			"arn:aws:dynamodb:*:*:table/whimbrel_workflow_request": {"dynamodb:PutItem"},
			"arn:aws:dynamodb:*:*:table/whimbrel_workflow_exec":    {"dynamodb:PutItem", "dynamodb:ConditionCheckItem"},
			"arn:aws:dynamodb:*:*:table/whimbrel_activity_exec":    {"dynamodb:PutItem"},
		},
		"whimbrel-operator": {"arn:aws:dynamodb:*:*:table/whimbrel_schedule": {"dynamodb:DeleteItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:Scan"}},
	}
	for name, byResource := range needs {
		b, err := os.ReadFile("../../examples/iam/" + name + ".json")
		if err != nil {
			t.Fatal(err)
		}
		var policy struct {
			Statement []struct {
				Effect   string
				Action   []string
				Resource []string
			}
		}
		if err := json.Unmarshal(b, &policy); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for res, actions := range byResource {
			for _, a := range actions {
				ok := false
				for _, s := range policy.Statement {
					if s.Effect == "Allow" && slices.Contains(s.Action, a) && slices.ContainsFunc(s.Resource, func(r string) bool { return matches(r, res) }) {
						ok = true
					}
				}
				if !ok {
					t.Errorf("%s does not grant %s on %s", name, a, res)
				}
			}
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// matches reports whether an IAM resource pattern (with * wildcards)
// covers resource.
func matches(pattern, resource string) bool {
	if pattern == "" {
		return resource == ""
	}
	if pattern[0] == '*' {
		for i := 0; i <= len(resource); i++ {
			if matches(pattern[1:], resource[i:]) {
				return true
			}
		}
		return false
	}
	return resource != "" && pattern[0] == resource[0] && matches(pattern[1:], resource[1:])
}
