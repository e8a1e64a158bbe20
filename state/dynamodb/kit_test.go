package dynamodb_test

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"go.yaml.in/yaml/v3"

	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// cfnTable is what the test reads of an AWS::DynamoDB::Table resource.
type cfnTable struct {
	Type                string `yaml:"Type"`
	DeletionPolicy      string `yaml:"DeletionPolicy"`
	UpdateReplacePolicy string `yaml:"UpdateReplacePolicy"`
	Properties          struct {
		TableName            yaml.Node `yaml:"TableName"`
		BillingMode          string    `yaml:"BillingMode"`
		AttributeDefinitions []struct {
			AttributeName string `yaml:"AttributeName"`
			AttributeType string `yaml:"AttributeType"`
		} `yaml:"AttributeDefinitions"`
		KeySchema              []keyElem `yaml:"KeySchema"`
		GlobalSecondaryIndexes []struct {
			IndexName  string    `yaml:"IndexName"`
			KeySchema  []keyElem `yaml:"KeySchema"`
			Projection struct {
				ProjectionType   string   `yaml:"ProjectionType"`
				NonKeyAttributes []string `yaml:"NonKeyAttributes"`
			} `yaml:"Projection"`
		} `yaml:"GlobalSecondaryIndexes"`
		StreamSpecification *struct {
			StreamViewType string `yaml:"StreamViewType"`
		} `yaml:"StreamSpecification"`
		TimeToLiveSpecification *struct {
			AttributeName string `yaml:"AttributeName"`
			Enabled       bool   `yaml:"Enabled"`
		} `yaml:"TimeToLiveSpecification"`
	} `yaml:"Properties"`
}

type keyElem struct {
	AttributeName string `yaml:"AttributeName"`
	KeyType       string `yaml:"KeyType"`
}

func describe(attrs map[string]string, keys []keyElem, projection string, nonKey []string) string {
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %s %s", k.AttributeName, k.KeyType, attrs[k.AttributeName]))
	}
	nk := slices.Clone(nonKey)
	sort.Strings(nk)
	return strings.Join(parts, ", ") + " / " + projection + " " + strings.Join(nk, ",")
}

// TestCloudFormationMatchesInstall keeps examples/cloudformation/tables.yaml
// equal to what whimbrel install creates: tables, keys and their types,
// indexes and their projections, billing, TTL.
func TestCloudFormationMatchesInstall(t *testing.T) {
	b, err := os.ReadFile("../../examples/cloudformation/tables.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tmpl struct {
		Resources map[string]cfnTable `yaml:"Resources"`
	}
	if err := yaml.Unmarshal(b, &tmpl); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for name, r := range tmpl.Resources {
		if r.Type != "AWS::DynamoDB::Table" {
			continue
		}
		if r.DeletionPolicy != "Retain" || r.UpdateReplacePolicy != "Retain" {
			t.Errorf("%s: DeletionPolicy %q, UpdateReplacePolicy %q: a table holding state must be Retain on both", name, r.DeletionPolicy, r.UpdateReplacePolicy)
		}
		p := r.Properties
		if p.TableName.Tag != "!Sub" || !strings.HasPrefix(p.TableName.Value, "${Prefix}") {
			t.Errorf("%s: TableName %q must be !Sub \"${Prefix}…\"", name, p.TableName.Value)
		}
		base := strings.TrimPrefix(p.TableName.Value, "${Prefix}")
		attrs := map[string]string{}
		var defs []string
		for _, d := range p.AttributeDefinitions {
			attrs[d.AttributeName] = d.AttributeType
			defs = append(defs, d.AttributeName+" "+d.AttributeType)
		}
		sort.Strings(defs)
		desc := []string{"billing " + p.BillingMode, "attributes " + strings.Join(defs, ", "), "keys " + describe(attrs, p.KeySchema, "", nil)}
		var ix []string
		for _, g := range p.GlobalSecondaryIndexes {
			ix = append(ix, g.IndexName+": "+describe(attrs, g.KeySchema, g.Projection.ProjectionType, g.Projection.NonKeyAttributes))
		}
		sort.Strings(ix)
		desc = append(desc, ix...)
		if sp := p.StreamSpecification; sp != nil {
			desc = append(desc, "stream "+sp.StreamViewType)
		}
		if ttl := p.TimeToLiveSpecification; ttl != nil && ttl.Enabled {
			desc = append(desc, "ttl "+ttl.AttributeName)
		}
		got[base] = strings.Join(desc, "\n")
	}

	want := map[string]string{}
	for _, in := range dynamodb.CreateTableInputs("") {
		base := aws.ToString(in.TableName)
		attrs := map[string]string{}
		var defs []string
		for _, d := range in.AttributeDefinitions {
			attrs[aws.ToString(d.AttributeName)] = string(d.AttributeType)
			defs = append(defs, aws.ToString(d.AttributeName)+" "+string(d.AttributeType))
		}
		sort.Strings(defs)
		var ks []keyElem
		for _, k := range in.KeySchema {
			ks = append(ks, keyElem{aws.ToString(k.AttributeName), string(k.KeyType)})
		}
		desc := []string{"billing " + string(in.BillingMode), "attributes " + strings.Join(defs, ", "), "keys " + describe(attrs, ks, "", nil)}
		var ix []string
		for _, g := range in.GlobalSecondaryIndexes {
			var gk []keyElem
			for _, k := range g.KeySchema {
				gk = append(gk, keyElem{aws.ToString(k.AttributeName), string(k.KeyType)})
			}
			ix = append(ix, aws.ToString(g.IndexName)+": "+describe(attrs, gk, string(g.Projection.ProjectionType), g.Projection.NonKeyAttributes))
		}
		sort.Strings(ix)
		desc = append(desc, ix...)
		if sp := in.StreamSpecification; sp != nil && aws.ToBool(sp.StreamEnabled) {
			desc = append(desc, "stream "+string(sp.StreamViewType))
		}
		if slices.Contains(dynamodb.TTLTables(), base) {
			desc = append(desc, "ttl expires_at")
		}
		want[base] = strings.Join(desc, "\n")
	}
	if len(got) != len(want) {
		t.Errorf("the template has %d tables, install creates %d", len(got), len(want))
	}
	for base, w := range want {
		if got[base] != w {
			t.Errorf("table %s:\ntemplate:\n%s\ninstall:\n%s", base, got[base], w)
		}
	}
}

// TestIAMPolicies: every policy parses, and only the operator installs.
// What each policy grants, by action and resource, is checked against what
// each binary calls by TestIAMPoliciesByResource in cmd/whimbrel.
func TestIAMPolicies(t *testing.T) {
	for _, name := range []string{"whimbrel-run", "whimbrel-run-simple", "whimbrel-monitor", "whimbrel-launcher", "whimbrel-operator", "whimbrel-processor"} {
		b, err := os.ReadFile("../../examples/iam/" + name + ".json")
		if err != nil {
			t.Fatal(err)
		}
		var policy struct {
			Version   string
			Statement []struct {
				Effect   string
				Action   []string
				Resource any
			}
		}
		if err := json.Unmarshal(b, &policy); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		var granted []string
		for _, s := range policy.Statement {
			if s.Effect == "Allow" {
				granted = append(granted, s.Action...)
			}
		}
		if len(granted) == 0 {
			t.Errorf("%s grants nothing", name)
		}
		if name != "whimbrel-operator" && slices.Contains(granted, "dynamodb:CreateTable") {
			t.Errorf("%s grants CreateTable: only the operator installs", name)
		}
	}
}

// TestLambdaTemplate: the processor's template subscribes the function to
// both streams with batch item failures, which its handler reports.
func TestLambdaTemplate(t *testing.T) {
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
	streams := map[string]bool{}
	for name, r := range tmpl.Resources {
		if r.Type != "AWS::Lambda::EventSourceMapping" {
			continue
		}
		if fmt.Sprint(r.Properties["FunctionResponseTypes"]) != "[ReportBatchItemFailures]" {
			t.Errorf("%s: FunctionResponseTypes %v, want [ReportBatchItemFailures]", name, r.Properties["FunctionResponseTypes"])
		}
		streams[fmt.Sprint(r.Properties["EventSourceArn"])] = true
	}
	if len(streams) != 2 {
		t.Errorf("event source mappings on %v, want one per stream", streams)
	}
}

// TestLambdaTemplateRole: the processor function's role grants what
// examples/iam/whimbrel-processor.json grants, table by table, except what
// only whimbrel-poller calls (its positions, DescribeTable), and the event
// source mappings' reads of the two streams, ListStreams included.
func TestLambdaTemplateRole(t *testing.T) {
	b, err := os.ReadFile("../../examples/lambda/processor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tmpl struct {
		Resources struct {
			Role struct {
				Properties struct {
					Policies []struct {
						PolicyDocument struct {
							Statement []struct {
								Effect   string   `yaml:"Effect"`
								Action   []string `yaml:"Action"`
								Resource []string `yaml:"Resource"`
							} `yaml:"Statement"`
						} `yaml:"PolicyDocument"`
					} `yaml:"Policies"`
				} `yaml:"Properties"`
			} `yaml:"Role"`
		} `yaml:"Resources"`
	}
	if err := yaml.Unmarshal(b, &tmpl); err != nil {
		t.Fatal(err)
	}
	streams := map[string]string{"WorkflowRequestStreamArn": "table/whimbrel_workflow_request/stream/*",
		"ActivityEventStreamArn": "table/whimbrel_activity_event/stream/*"}
	got := map[string]bool{}
	for _, p := range tmpl.Resources.Role.Properties.Policies {
		for _, s := range p.PolicyDocument.Statement {
			for _, a := range s.Action {
				for _, r := range s.Resource {
					r = strings.TrimPrefix(r, "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:")
					r = strings.ReplaceAll(r, "${Prefix}", "whimbrel_")
					if stream, ok := streams[r]; ok { // !Ref of a parameter
						r = stream
					}
					got[s.Effect+" "+a+" "+r] = true
				}
			}
		}
	}
	b, err = os.ReadFile("../../examples/iam/whimbrel-processor.json")
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
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, s := range policy.Statement {
		for _, a := range s.Action {
			for _, r := range s.Resource {
				r = strings.TrimPrefix(r, "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:")
				if a == "dynamodb:DescribeTable" || strings.Contains(r, "stream_position") {
					continue // whimbrel-poller's own
				}
				want[s.Effect+" "+a+" "+r] = true
			}
		}
	}
	for _, stream := range []string{"table/whimbrel_workflow_request/stream/*", "table/whimbrel_activity_event/stream/*"} {
		want["Allow dynamodb:ListStreams "+stream] = true
	}
	for k := range want {
		if !got[k] {
			t.Errorf("the template's role lacks %s", k)
		}
	}
	for k := range got {
		if !want[k] {
			t.Errorf("the template's role grants %s, which the processor does not need", k)
		}
	}
}
