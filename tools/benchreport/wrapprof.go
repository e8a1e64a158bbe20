package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/workflow"
)

// --- where the wrapper's CPU goes

// wrapProfileHeading heads the breakdown of the wrapper's CPU.
const wrapProfileHeading = "## Wrapper: where its CPU goes"

// profRuns is how many profiled wrappers make the breakdown, per store.
const profRuns = 60

// profParts are the functions whose cumulative samples the breakdown
// shows, and what each stands for.
var profParts = []struct{ fn, what string }{
	{"github.com/alecthomas/kong.(*Kong).Parse", "command line (kong)"},
	{"github.com/aws/aws-sdk-go-v2/config.LoadDefaultConfig", "AWS configuration (default chain, `AWS_CA_BUNDLE`)"},
	{"github.com/aws/aws-sdk-go-v2/service/dynamodb.NewFromConfig", "DynamoDB client set-up"},
	{"github.com/whimbrel/whimbrel/state/sqlite.Open", "opening the embedded store"},
	{"github.com/whimbrel/whimbrel/wrapper.(*run).claim", "claim (read the workflow, QUEUED → RUNNING)"},
	{"github.com/whimbrel/whimbrel/wrapper.(*run).prepare", "the command's data (read and decode its definition entry, files)"},
	{"github.com/whimbrel/whimbrel/definition.ReadStored", "… of which decoding the stored definition"},
	{"github.com/whimbrel/whimbrel/process.Start", "starting the command"},
	{"github.com/whimbrel/whimbrel/wrapper.(*run).finish", "recording the outcome and advancing"},
	{"github.com/whimbrel/whimbrel/workflow.AdvanceKnown", "… of which advancing the workflow"},
	{"encoding/json.Unmarshal", "JSON decoding (all callers)"},
	{"encoding/json.Marshal", "JSON encoding (all callers)"},
	{"github.com/aws/smithy-go/middleware.decoratedHandler.Handle", "the DynamoDB calls (the SDK's middleware, signing, HTTP)"},
	{"runtime.gcBgMarkWorker", "garbage collection"},
	{"runtime.mcall", "the Go scheduler"},
}

// profileWrapper runs profRuns `whimbrel-run --no-guard -- true` on each
// store with WHIMBREL_CPUPROFILE, and returns for each store the CPU per
// run from rusage, the profile's samples per run, and its cumulative
// samples per run of each of profParts.
func profileWrapper(ctx context.Context, binary, endpoint string) (map[string][]time.Duration, error) {
	dir, err := os.MkdirTemp("", "whimbrel-prof-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	d, err := trueActivities("prof", "a%03d", profRuns)
	if err != nil {
		return nil, err
	}
	prefix := "prof_" + uuid.NewString()[:8] + "_"
	ddb := dynamodb.New(client(endpoint), dynamodb.Options{Prefix: prefix})
	if _, err := ddb.Install(ctx, false); err != nil {
		return nil, err
	}
	dbPath := filepath.Join(dir, "state.db")
	lite, err := sqlite.Open(dbPath, sqlite.Options{})
	if err != nil {
		return nil, err
	}
	defer lite.Close()
	if _, err := lite.Install(ctx, false); err != nil {
		return nil, err
	}
	res := map[string][]time.Duration{}
	for _, s := range []struct {
		name string
		st   state.Store
		env  []string
	}{
		{"DynamoDB Local", ddb, []string{"WHIMBREL_STORE=dynamodb", "WHIMBREL_TABLE_PREFIX=" + prefix, "AWS_ENDPOINT_URL_DYNAMODB=" + endpoint, "AWS_REGION=us-east-1",
			"AWS_ACCESS_KEY_ID=whimbrel", "AWS_SECRET_ACCESS_KEY=whimbrel", "AWS_EC2_METADATA_DISABLED=true"}},
		{"sqlite", lite, []string{"WHIMBREL_STORE=sqlite:" + dbPath}},
	} {
		id, _, err := workflow.Start(ctx, s.st, d, workflow.StartOptions{})
		if err != nil {
			return nil, err
		}
		profDir := filepath.Join(dir, strings.Fields(s.name)[0])
		if err := os.Mkdir(profDir, 0o755); err != nil {
			return nil, err
		}
		var cpu time.Duration
		for i := range profRuns {
			cmd := exec.Command(binary, "--no-guard", "--", "true")
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "AWS_CA_BUNDLE=" + os.Getenv("AWS_CA_BUNDLE"),
				"WHIMBREL_CPUPROFILE=" + filepath.Join(profDir, "%p.prof"),
				"WHIMBREL_ACTIVITY_EXEC_ID=" + state.ActivityExecIDFor(id, fmt.Sprintf("a%03d", i)), "WHIMBREL_WORKFLOW_EXEC_ID=" + id}, s.env...)
			if out, err := cmd.CombinedOutput(); err != nil {
				return nil, fmt.Errorf("%s -- true: %v\n%s", binary, err, out)
			}
			ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
			cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
		profiles, _ := filepath.Glob(filepath.Join(profDir, "*.prof"))
		out, err := exec.Command("go", append([]string{"tool", "pprof", "-top", "-cum", "-nodecount=100000", binary}, profiles...)...).Output()
		if err != nil {
			return nil, fmt.Errorf("go tool pprof: %w", err)
		}
		total, cums := parseTop(string(out))
		row := []time.Duration{cpu / profRuns, total / profRuns}
		for _, p := range profParts {
			row = append(row, cums[p.fn]/profRuns)
		}
		res[s.name] = row
	}
	return res, nil
}

// parseTop reads `go tool pprof -top -cum`: the total samples, and each
// function's cumulative samples.
func parseTop(out string) (time.Duration, map[string]time.Duration) {
	var total time.Duration
	cums := map[string]time.Duration{}
	for _, l := range strings.Split(out, "\n") {
		if _, rest, ok := strings.Cut(l, "Total samples = "); ok {
			total = parseSample(strings.Fields(rest)[0])
			continue
		}
		f := strings.Fields(l)
		if len(f) >= 6 && strings.HasSuffix(f[4], "%") {
			name := strings.Join(f[5:], " ")
			name = strings.TrimSuffix(name, " (inline)")
			cums[name] += parseSample(f[3])
		}
	}
	return total, cums
}

// parseSample reads a pprof duration such as 510ms or 1.20s.
func parseSample(s string) time.Duration {
	if d, err := time.ParseDuration(s); err == nil {
		return d
	}
	if v, err := strconv.ParseFloat(strings.TrimRight(s, "a-zµ"), 64); err == nil {
		return time.Duration(v * float64(time.Millisecond))
	}
	return 0
}

// writeWrapProfile profiles the wrapper in bin and writes the breakdown.
func writeWrapProfile(ctx context.Context, b *strings.Builder, bin, endpoint string) error {
	res, err := profileWrapper(ctx, filepath.Join(bin, "whimbrel-run"), endpoint)
	if err != nil {
		return fmt.Errorf("wrapper profile: %w", err)
	}
	// The start alone: the process, the runtime and every package's
	// init, and kong, with nothing to run.
	var start time.Duration
	for range profRuns {
		cmd := exec.Command(filepath.Join(bin, "whimbrel-run"), "--version")
		cmd.Env = []string{}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("whimbrel-run --version: %v\n%s", err, out)
		}
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		start += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	fmt.Fprintf(b, "%s\n\n%d runs of `whimbrel-run --no-guard -- true` on each store (bin/, as `make native` builds it), each with `WHIMBREL_CPUPROFILE`, merged with `go tool pprof -top -cum`; ms per run. The profile sees only what runs after `main` starts its profile: the process's exec, page faults, package init and exit are in rusage's figure only. `whimbrel-run --version` (the process, the runtime, every package's init and the command line, nothing run) took **%.1f ms** per run (user + system, %d runs).\n\n",
		wrapProfileHeading, profRuns, float64(start)/float64(time.Millisecond)/profRuns, profRuns)
	fmt.Fprintf(b, "| ms per run | DynamoDB Local | sqlite |\n| --- | ---: | ---: |\n")
	dyn, lite := res["DynamoDB Local"], res["sqlite"]
	fmt.Fprintf(b, "| **CPU per run (rusage: the wrapper and `true`)** | %s | %s |\n", ms2(dyn[0]), ms2(lite[0]))
	fmt.Fprintf(b, "| in the Go profile | %s | %s |\n", ms2(dyn[1]), ms2(lite[1]))
	for i, p := range profParts {
		fmt.Fprintf(b, "| %s | %s | %s |\n", p.what, ms2(dyn[2+i]), ms2(lite[2+i]))
	}
	fmt.Fprintln(b)
	return nil
}

func ms2(d time.Duration) string {
	return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond))
}
