package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/workflow"
)

// --- the wrapper's CPU per activity, and its container build

// leanTag is the build tag of the container image's whimbrel-run that
// leaves the embedded store out; its --version names it.
const leanTag = "whimbrel_nosqlite"

// containerTags are the build tags of the container image's whimbrel-run:
// no embedded store, and AWS settings from the environment, web identity,
// the container credentials endpoint and instance metadata only.
const containerTags = leanTag + ",whimbrel_leanaws"

// cpuRuns is how many `whimbrel-run -- true` make one CPU figure.
const cpuRuns = 20

// buildLean builds whimbrel-run as the container image does (without the
// embedded store) into a new folder under dir, and returns the folder.
func buildLean(dir string) (string, error) {
	out := filepath.Join(dir, "lean")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-tags", containerTags, "-o", filepath.Join(out, "whimbrel-run"), "./cmd/whimbrel-run")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the container's whimbrel-run: %v\n%s", err, b)
	}
	return out, nil
}

// lean reports whether the wrapper binary was built without the embedded
// store (its --version says so).
func lean(binary string) bool {
	out, _ := exec.Command(binary, "--version").CombinedOutput()
	return strings.Contains(string(out), leanTag)
}

// cpuPerRun is the CPU (user + system, of the wrapper and its command, from
// rusage) of one `whimbrel-run --no-guard -- true` on each store, the mean
// of cpuRuns runs of activities of one workflow; 0 for a store the binary
// lacks. --no-guard: under a local launcher, which is the guard, a wrapper
// starts no guard process either.
func cpuPerRun(ctx context.Context, binary, endpoint string) (dyn, lite time.Duration, err error) {
	d, err := trueActivities("cpu", "a%03d", cpuRuns)
	if err != nil {
		return 0, 0, err
	}
	dir, err := os.MkdirTemp("", "whimbrel-cpu-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	prefix := "cpu_" + uuid.NewString()[:8] + "_"
	ddb := dynamodb.New(client(endpoint), dynamodb.Options{Prefix: prefix})
	if _, err := ddb.Install(ctx, false); err != nil {
		return 0, 0, err
	}
	stores := []struct {
		st  state.Store
		env []string
		out *time.Duration
	}{{ddb, []string{"WHIMBREL_STORE=dynamodb", "WHIMBREL_TABLE_PREFIX=" + prefix, "AWS_ENDPOINT_URL_DYNAMODB=" + endpoint, "AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=whimbrel", "AWS_SECRET_ACCESS_KEY=whimbrel", "AWS_EC2_METADATA_DISABLED=true"}, &dyn}}
	if !lean(binary) {
		dbPath := filepath.Join(dir, "state.db")
		st, err := sqlite.Open(dbPath, sqlite.Options{})
		if err != nil {
			return 0, 0, err
		}
		defer st.Close()
		if _, err := st.Install(ctx, false); err != nil {
			return 0, 0, err
		}
		stores = append(stores, struct {
			st  state.Store
			env []string
			out *time.Duration
		}{st, []string{"WHIMBREL_STORE=sqlite:" + dbPath}, &lite})
	}
	for _, s := range stores {
		id, _, err := workflow.Start(ctx, s.st, d, workflow.StartOptions{})
		if err != nil {
			return 0, 0, err
		}
		var total time.Duration
		for i := range cpuRuns {
			cmd := exec.Command(binary, "--no-guard", "--", "true")
			// The machine's AWS_CA_BUNDLE, if any, goes along, as a
			// launcher's environment hands it to its wrappers.
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "AWS_CA_BUNDLE=" + os.Getenv("AWS_CA_BUNDLE"),
				"WHIMBREL_ACTIVITY_EXEC_ID=" + state.ActivityExecIDFor(id, fmt.Sprintf("a%03d", i)), "WHIMBREL_WORKFLOW_EXEC_ID=" + id}, s.env...)
			if out, err := cmd.CombinedOutput(); err != nil {
				return 0, 0, fmt.Errorf("%s -- true: %v\n%s", binary, err, out)
			}
			ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
			total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
		*s.out = total / cpuRuns
	}
	return dyn, lite, nil
}

// ms writes a CPU figure in milliseconds, "-" for none.
func ms(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond))
}
