package launcher_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/workflow"
)

// containerRuntime stands in for `docker run` as far as the data
// contract cares: the "container" starts in a fresh directory of its own,
// sees only the variables named by --env (and those its image sets:
// here, how to reach the store), and runs the image's entrypoint,
// whimbrel-run, on the command. Nothing is mounted: the wrapper inside
// reads and writes the data files itself.
const containerRuntime = `#!/bin/sh
shift # run
keep="PATH HOME"
while [ $# -gt 0 ]; do
  case "$1" in
    --detach|--rm) shift ;;
    --name|--label|--stop-timeout) shift 2 ;;
    --env) keep="$keep $2"; shift 2 ;;
    *) break ;;
  esac
done
shift # the image
for v in $(env | sed -n 's/^\([A-Za-z_][A-Za-z0-9_]*\)=.*/\1/p'); do
  case " $keep " in *" $v "*) ;; *) unset "$v" ;; esac
done
IMAGE_ENV
ctr=$(mktemp -d "ROOT/ctr.XXXXXX")
cd "$ctr" && nohup WRAPPER -- "$@" > "$ctr/log" 2>&1 &
echo "${ctr##*/}"
`

const dockerData = `
name: data-docker
params:
  base: {required: true}
defaults:
  launch: {type: docker, image: "etl:1"}
activities:
  first:
    command: ["sh", "-c", "echo '{\"n\": 41}' > \"$WHIMBREL_OUTPUT\""]
  second:
    depends_on: [first]
    env:
      SUM: "{{ outputs.first.n }} + {{ params.base }}"
    command:
      - sh
      - -c
      - |
        echo "{\"sum\": $(( {{ outputs.first.n }} + WHIMBREL_PARAM_BASE )), \"expr\": \"$SUM\", \"inputs\": $(cat "$WHIMBREL_INPUTS")}" > "$WHIMBREL_OUTPUT"
`

// TestDataThroughDocker: through the Docker backend the templates reach
// the container as written, and the wrapper inside resolves them from the
// store, hands the command its inputs, and records its output: no volume,
// no launcher in the data's path.
func TestDataThroughDocker(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	root := t.TempDir()
	var imageEnv []string
	for _, kv := range dynamotest.Env(t, st.Prefix()) {
		imageEnv = append(imageEnv, "export "+kv)
	}
	script := strings.NewReplacer("IMAGE_ENV", strings.Join(imageEnv, "\n"), "ROOT", root, "WRAPPER", wrapper).Replace(containerRuntime)
	fake := filepath.Join(root, "docker")
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := workflow.Parse("docker.yaml", []byte(dockerData))
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := workflow.Start(testbin.Context(t), st, d, workflow.StartOptions{Params: map[string]string{"base": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{workflow.LaunchDocker: &launcher.Docker{Binary: fake}}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	wf := waitSettled(t, st, id, time.Minute)
	cancel()
	<-done
	if wf.State != state.WorkflowCompleted {
		logs, _ := filepath.Glob(filepath.Join(root, "ctr.*", "log"))
		for _, p := range logs {
			b, _ := os.ReadFile(p)
			t.Logf("%s:\n%s", p, b)
		}
		t.Fatalf("workflow %s: %s", wf.State, wf.Reason)
	}
	a, err := st.GetActivity(testbin.Context(t), state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "second"), WorkflowExecID: id})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"sum":42,"expr":"41 + 1","inputs":{"params":{"base":"1"},"outputs":{"first":{"n":41}}}}`; a.Output != want {
		t.Errorf("second's output %s, want %s", a.Output, want)
	}
}
