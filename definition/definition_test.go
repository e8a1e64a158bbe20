package definition_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
)

const minimal = `
name: nightly-etl
activities:
  extract:
    command: ["sh", "-c", "echo extracting"]
  transform:
    depends_on: [extract]
    command: ["sh", "-c", "echo transforming"]
`

func TestParseMinimal(t *testing.T) {
	d, err := definition.Parse("etl.yaml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "nightly-etl" || len(d.Activities) != 2 || !slices.Equal(d.Names(), []string{"extract", "transform"}) {
		t.Errorf("parsed %+v, names %v", d, d.Names())
	}
	eff := d.Effective("transform")
	if eff.Launch.Type != definition.LaunchLocal || eff.QueuedTimeout != 0 {
		t.Errorf("effective settings: %+v", eff)
	}
	// JSON is accepted, and the stored form reads back the same.
	j, err := definition.Parse("etl.json", []byte(d.JSON()))
	if err != nil || j.JSON() != d.JSON() {
		t.Errorf("JSON round trip: %v\n%s\n%s", err, j.JSON(), d.JSON())
	}
	if s, err := definition.FromJSON(d.JSON()); err != nil || s.JSON() != d.JSON() {
		t.Errorf("FromJSON: %v", err)
	}
}

func TestParseSettings(t *testing.T) {
	d, err := definition.Parse("w.yaml", []byte(`
name: w
defaults:
  heartbeat_interval: 5s
  heartbeat_timeout: 30s
  env: {STAGE: prod, REGION: eu}
  launch: {type: docker, image: "etl:1"}
activities:
  a:
    env: {STAGE: test}
    timeout: 1h
    queued_timeout: 2m
  b:
    depends_on: [a]
    launch:
      type: ecs
      cluster: batch
      task_definition: etl:3
      container: main
      subnets: [subnet-1]
      assign_public_ip: true
      retry_for: 3m
`))
	if err != nil {
		t.Fatal(err)
	}
	a := d.Effective("a")
	if a.Env["STAGE"] != "test" || a.Env["REGION"] != "eu" || time.Duration(a.Timeout) != time.Hour ||
		time.Duration(a.HeartbeatInterval) != 5*time.Second || a.Launch.Image != "etl:1" || time.Duration(a.QueuedTimeout) != 2*time.Minute {
		t.Errorf("a: %+v launch %+v", a, a.Launch)
	}
	if b := d.Effective("b"); b.Launch.Type != definition.LaunchECS || b.Launch.Cluster != "batch" || !b.Launch.AssignPublicIP ||
		time.Duration(b.Launch.RetryFor) != 3*time.Minute {
		t.Errorf("b launch: %+v", b.Launch)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"empty file", ``, []string{"w.yaml: the file is empty"}},
		{"no activities", "name: w\n", []string{"no activities"}},
		{"no name", "activities:\n  a: {command: [true]}\n", []string{"no name"}},
		{"invalid workflow name", "name: bad name\nactivities:\n  a: {command: [true]}\n", []string{`name "bad name" is invalid`}},
		{"invalid activity name", "name: w\nactivities:\n  \"a:b\": {command: [true]}\n", []string{`w.yaml:3: activity name "a:b" is invalid`}},
		{"unknown dependency", "name: w\nactivities:\n  extract: {command: [true]}\n  load: {command: [true], depends_on: [extrct]}\n",
			[]string{`w.yaml:4: activity "load" depends on "extrct", which is not an activity of this workflow (did you mean "extract"?)`}},
		{"cycle", "name: w\nactivities:\n  a: {command: [true], depends_on: [c]}\n  b: {command: [true], depends_on: [a]}\n  c: {command: [true], depends_on: [b]}\n",
			[]string{"the activities form a cycle: a → b → c → a"}},
		{"self dependency", "name: w\nactivities:\n  a: {command: [true], depends_on: [a]}\n", []string{`activity "a" depends on itself`}},
		{"duplicate activity", "name: w\nactivities:\n  a: {command: [true]}\n  a: {command: [false]}\n",
			[]string{`w.yaml:4: activity "a" is defined twice (first at line 3)`}},
		{"duplicate field", "name: w\nname: v\nactivities:\n  a: {command: [true]}\n", []string{`w.yaml:2: the workflow: "name" is given twice`}},
		{"typo in activity field", "name: w\nactivities:\n  a:\n    command: [true]\n    depend_on: [b]\n",
			[]string{`w.yaml:5: activity "a": unknown field "depend_on" (did you mean "depends_on"?)`}},
		{"typo in top field", "name: w\nactivitys:\n  a: {command: [true]}\n", []string{`unknown field "activitys" (did you mean "activities"?)`}},
		{"unknown field, no suggestion", "name: w\nowner: me\nactivities:\n  a: {command: [true]}\n", []string{`unknown field "owner" (known: name, description, retention, defaults, activities, params, outputs)`}},
		{"typo in launch", "name: w\nactivities:\n  a:\n    launch: {type: docker, imag: x}\n", []string{`activity "a": launch: unknown field "imag" (did you mean "image"?)`}},
		{"bad duration", "name: w\nactivities:\n  a: {command: [true], timeout: 10 minutes}\n", []string{`"10 minutes" is not a duration`}},
		{"negative duration", "name: w\nactivities:\n  a: {command: [true], timeout: -5s}\n", []string{`"-5s" is negative`}},
		{"heartbeat timeout too short", "name: w\nactivities:\n  a: {command: [true], heartbeat_interval: 10s, heartbeat_timeout: 15s}\n",
			[]string{`activity "a": heartbeat timeout 15s is under 2× the interval 10s`}},
		{"no command", "name: w\nactivities:\n  a: {depends_on: []}\n", []string{`activity "a" has no command`}},
		{"empty activity", "name: w\nactivities:\n  a:\n", []string{`w.yaml:3: activity "a" is empty`}},
		{"unknown launch type", "name: w\nactivities:\n  a: {command: [true], launch: {type: dockr}}\n", []string{`launch type "dockr" is unknown: use local, docker or ecs (did you mean "docker"?)`}},
		{"docker without image", "name: w\nactivities:\n  a: {launch: {type: docker}}\n", []string{"launch type docker needs an image"}},
		{"ecs without task definition", "name: w\nactivities:\n  a: {launch: {type: ecs, cluster: c}}\n", []string{"needs a task_definition"}},
		{"not yaml", "name: [w\n", []string{"w.yaml: "}},
		{"activities not a mapping", "name: w\nactivities: [a, b]\n", []string{"activities must be a mapping"}},
		{"bad duration names line and activity", "name: w\nactivities:\n  a:\n    command: [true]\n    timeout: soon\n",
			[]string{`w.yaml:5: activity "a": timeout "soon" is not a duration`}},
		{"empty command entry", "name: w\nactivities:\n  a: {command: [\"\"]}\n", []string{`activity "a": command holds an empty or non-text entry`}},
		{"null dependency", "name: w\nactivities:\n  a: {command: [true], depends_on: [~]}\n", []string{`depends_on holds an empty or non-text entry`}},
		{"command not a list", "name: w\nactivities:\n  a: {command: echo hi}\n", []string{`w.yaml:3: activity "a": command must be a list`}},
		{"env not a mapping", "name: w\nactivities:\n  a: {command: [true], env: [A]}\n", []string{`env must be a mapping`}},
		{"second document", "name: w\nactivities:\n  a: {command: [true]}\n---\nname: v\n", []string{"w.yaml:4: a second YAML document"}},
		{"lowercase launch type", "name: w\nactivities:\n  a: {launch: {type: ecs, task_definition: t, container: c, launch_type: fargate}}\n", []string{`launch_type "fargate" is not EC2, FARGATE or EXTERNAL`}},
		{"security groups without subnets", "name: w\nactivities:\n  a: {launch: {type: ecs, task_definition: t, container: c, security_groups: [sg-1]}}\n", []string{"security_groups need subnets"}},
		{"launch type and capacity provider", "name: w\nactivities:\n  a: {launch: {type: ecs, task_definition: t, container: c, launch_type: FARGATE, capacity_provider: FARGATE_SPOT}}\n", []string{"exclude each other"}},
		{"bad retry_for", "name: w\nactivities:\n  a: {command: [true], launch: {retry_for: a while}}\n", []string{`launch: retry_for "a while" is not a duration`}},
		{"retry_for beyond the queued timeout", "name: w\nactivities:\n  a: {command: [true], queued_timeout: 2m, launch: {retry_for: 5m}}\n",
			[]string{`activity "a": launch.retry_for 5m0s is not shorter than its queued_timeout 2m0s`}},
		{"bad retention", "name: w\nretention: forever\nactivities:\n  a: {command: [true]}\n", []string{`w.yaml:2: the workflow: retention "forever" is not a duration`}},
		{"several problems at once", "name: w\nactivities:\n  a: {command: [true], depends_on: [x]}\n  b: {command: [true], depends_on: [y]}\n",
			[]string{`"a" depends on "x"`, `"b" depends on "y"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := definition.Parse("w.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatalf("parsed without error; want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error:\n%v\nwant it to contain:\n%s", err, w)
				}
			}
		})
	}
}

func TestParseRetention(t *testing.T) {
	d, err := definition.Parse("w.yaml", []byte("name: w\nretention: 30d\nactivities:\n  a: {command: [\"true\"]}\n"))
	if err != nil || time.Duration(d.Retention) != 30*24*time.Hour {
		t.Fatalf("retention: %v %v", d, err)
	}
	back, err := definition.FromJSON(d.JSON())
	if err != nil || back.Retention != d.Retention {
		t.Errorf("stored retention: %v %v", back, err)
	}
}

func TestParseAnchors(t *testing.T) {
	d, err := definition.Parse("w.yaml", []byte(`
name: w
x-common: &common
  heartbeat_interval: 5s
  env: {STAGE: test}
activities:
  a:
    <<: *common
    command: [sh, -c, "echo a"]
  b:
    <<: *common
    depends_on: [a]
    command: [sh, -c, "echo b"]
`))
	if err != nil {
		t.Fatalf("anchors and merge keys: %v", err)
	}
	if b := d.Effective("b"); time.Duration(b.HeartbeatInterval) != 5*time.Second || b.Env["STAGE"] != "test" {
		t.Errorf("merged settings: %+v", b)
	}
}

// TestExamplesParse keeps the shipped examples valid.
func TestExamplesParse(t *testing.T) {
	files, err := filepath.Glob("../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	for _, f := range files {
		if _, err := definition.Load(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
