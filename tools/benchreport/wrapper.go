package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/workflow"
)

// --- the wrapper's resident memory and size

// rssTarget is the resident memory the wrapper heartbeating on DynamoDB
// should stay within.
const rssTarget = 13 << 10 // kB

// wrapperRSS is what one wrapper binary weighs.
type wrapperRSS struct {
	dynamodb, sqlite       rss           // while heartbeating (sqlite: none for a build without it)
	size                   int64         // bytes
	cpuDynamoDB, cpuSQLite time.Duration // per `whimbrel-run -- true` (see cpuPerRun)
}

// rss is a process's resident memory in kB: all of it, and its anonymous
// part (the heap, stacks and the runtime's own). The rest is the binary's
// pages, which every process running the binary shares.
type rss struct{ all, anon int }

func (r rss) String() string {
	if r.all == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f (%.1f)", float64(r.all)/1024, float64(r.anon)/1024)
}

// measureRSS measures the wrapper in bin on each store, the container's
// (leanBin) on DynamoDB, and tini for comparison (when it is on the PATH).
func measureRSS(ctx context.Context, bin, leanBin, endpoint string) (map[string]rss, error) {
	w, err := measureWrapper(ctx, filepath.Join(bin, "whimbrel-run"), endpoint)
	if err != nil {
		return nil, err
	}
	l, err := measureWrapper(ctx, filepath.Join(leanBin, "whimbrel-run"), endpoint)
	if err != nil {
		return nil, err
	}
	res := map[string]rss{
		"whimbrel-run on DynamoDB (heartbeating every 200 ms)":                                              w.dynamodb,
		"whimbrel-run on sqlite (heartbeating every 200 ms)":                                                w.sqlite,
		"whimbrel-run, container build (no embedded store, lean AWS configuration), on DynamoDB (the same)": l.dynamodb,
	}
	if _, err := exec.LookPath("tini"); err == nil {
		r, err := rssOf(exec.Command("tini", "-s", "--", "sleep", "4"))
		if err != nil {
			return nil, err
		}
		res["tini"] = r
	}
	return res, nil
}

// measureWrapper runs the wrapper binary on one activity of each store
// and reads its VmRSS 3 s in, a dozen heartbeats later.
func measureWrapper(ctx context.Context, binary, endpoint string) (wrapperRSS, error) {
	var w wrapperRSS
	fi, err := os.Stat(binary)
	if err != nil {
		return w, err
	}
	w.size = fi.Size()
	d, _ := definition.Parse("r.yaml", []byte("name: rss\nactivities:\n  a: {command: [\"true\"]}\n"))
	prefix := "rss_" + uuid.NewString()[:8] + "_"
	dyn := dynamodb.New(client(endpoint), dynamodb.Options{Prefix: prefix})
	if _, err := dyn.Install(ctx, false); err != nil {
		return w, err
	}
	dir, err := os.MkdirTemp("", "whimbrel-rss-")
	if err != nil {
		return w, err
	}
	defer os.RemoveAll(dir)
	dbPath := filepath.Join(dir, "state.db")
	lite, err := sqlite.Open(dbPath, sqlite.Options{})
	if err != nil {
		return w, err
	}
	defer lite.Close()
	if _, err := lite.Install(ctx, false); err != nil {
		return w, err
	}
	type store struct {
		st  state.Store
		env []string
		r   *rss
	}
	stores := []store{{dyn, []string{"WHIMBREL_STORE=dynamodb", "WHIMBREL_TABLE_PREFIX=" + prefix, "AWS_ENDPOINT_URL_DYNAMODB=" + endpoint, "AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=whimbrel", "AWS_SECRET_ACCESS_KEY=whimbrel", "AWS_EC2_METADATA_DISABLED=true"}, &w.dynamodb}}
	if !lean(binary) {
		stores = append(stores, store{lite, []string{"WHIMBREL_STORE=sqlite:" + dbPath}, &w.sqlite})
	}
	for _, s := range stores {
		id, _, err := workflow.Start(ctx, s.st, d, workflow.StartOptions{})
		if err != nil {
			return w, err
		}
		cmd := exec.Command(binary, "--heartbeat-interval", "200ms", "--heartbeat-timeout", "2s", "--", "sleep", "4")
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "WHIMBREL_ACTIVITY_EXEC_ID=" + state.ActivityExecIDFor(id, "a"),
			"WHIMBREL_WORKFLOW_EXEC_ID=" + id}, s.env...)
		if *s.r, err = rssOf(cmd); err != nil {
			return w, err
		}
	}
	return w, nil
}

// rssOf starts cmd, reads its resident memory 3 s in, and waits for it.
func rssOf(cmd *exec.Cmd) (rss, error) {
	if err := cmd.Start(); err != nil {
		return rss{}, err
	}
	time.Sleep(3 * time.Second)
	var r rss
	all, err := vmRSS(cmd.Process.Pid)
	if err == nil {
		r.all = all
		r.anon, err = rssAnon(cmd.Process.Pid)
	}
	_ = cmd.Wait()
	return r, err
}

// rssAnon reads a process's RssAnon in kB.
func rssAnon(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "RssAnon:"); ok {
			return strconv.Atoi(strings.Fields(v)[0])
		}
	}
	return 0, fmt.Errorf("no RssAnon for %d", pid)
}

// writeWrapper writes the wrapper's sections.
func writeWrapper(ctx context.Context, b *strings.Builder, before, bin, endpoint, out string) error {
	tmp, err := os.MkdirTemp("", "whimbrel-lean-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	leanBin, err := buildLean(tmp)
	if err != nil {
		return err
	}
	rss, err := measureRSS(ctx, bin, leanBin, endpoint)
	if err != nil {
		return fmt.Errorf("resident memory: %w", err)
	}
	writeRSS(b, rss)
	if err := writeWrapProfile(ctx, b, bin, endpoint); err != nil {
		return err
	}
	if err := writeBeforeAfter(ctx, b, before, bin, leanBin, endpoint, out); err != nil {
		return fmt.Errorf("wrapper before and after: %w", err)
	}
	if err := writeLongWait(ctx, b, before, bin, leanBin, endpoint, out); err != nil {
		return fmt.Errorf("wrapper over a longer wait: %w", err)
	}
	return nil
}

func writeRSS(b *strings.Builder, res map[string]rss) {
	fmt.Fprintf(b, "## Resident memory while heartbeating\n\nVmRSS of the wrapper process itself (not its command) 3 s into a run, and in brackets its anonymous part (RssAnon: heap, stacks, runtime); the rest is pages of the binary, which the kernel maps around each page touched and which every process running the binary shares. Target %.0f MB on DynamoDB.\n\n| process | resident (anonymous), MB |\n| --- | ---: |\n", float64(rssTarget)/1024)
	names := make([]string, 0, len(res))
	for n := range res {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(b, "| %s | %s |\n", n, res[n])
	}
	fmt.Fprintln(b)
}

// beforeAfterHeading heads the comparison of the wrapper with an earlier
// build of it.
const beforeAfterHeading = "## Wrapper: binary size and resident memory, side by side with an earlier build"

// writeBeforeAfter compares the wrapper in bin with the one in before,
// measured side by side, three times each, alternating. Without before, it
// keeps the comparison the report at out holds, if any.
func writeBeforeAfter(ctx context.Context, b *strings.Builder, before, bin, leanBin, endpoint, out string) error {
	if before == "" {
		if old, err := os.ReadFile(out); err == nil {
			if _, kept, ok := strings.Cut(string(old), beforeAfterHeading); ok {
				if end := strings.Index(kept, "\n## "); end >= 0 {
					kept = kept[:end+1]
				}
				b.WriteString(beforeAfterHeading + kept)
			}
		}
		return nil
	}
	builds := []string{before, bin, leanBin}
	names := []string{"before", "after", "after, container build"}
	if beforeLean := filepath.Join(before, "lean"); fileExists(filepath.Join(beforeLean, "whimbrel-run")) {
		builds = append(builds, beforeLean)
		names = append(names, "before, container build")
	}
	runs := make([][]wrapperRSS, len(builds))
	for range 3 { // alternating, so that the machine's load hits every build alike
		for i, dir := range builds {
			w, err := measureWrapper(ctx, filepath.Join(dir, "whimbrel-run"), endpoint)
			if err != nil {
				return err
			}
			if w.cpuDynamoDB, w.cpuSQLite, err = cpuPerRun(ctx, filepath.Join(dir, "whimbrel-run"), endpoint); err != nil {
				return err
			}
			runs[i] = append(runs[i], w)
		}
	}
	mb := func(ws []wrapperRSS, f func(wrapperRSS) rss) string {
		vs := make([]string, len(ws))
		for i, w := range ws {
			vs[i] = f(w).String()
		}
		return strings.Join(vs, " / ")
	}
	cpu := func(ws []wrapperRSS, f func(wrapperRSS) time.Duration) string {
		vs := make([]string, len(ws))
		for i, w := range ws {
			vs[i] = ms(f(w))
		}
		return strings.Join(vs, " / ")
	}
	dyn := func(w wrapperRSS) rss { return w.dynamodb }
	lite := func(w wrapperRSS) rss { return w.sqlite }
	fmt.Fprintf(b, "%s\n\nwhimbrel-run built as `make native` builds it (`CGO_ENABLED=0 go build -trimpath -ldflags '-s -w'`), before (%s) and after, and after as the container image builds it (the same with `-tags %s`), and, when BEFORE holds a lean/whimbrel-run, before's container build, measured side by side in one run of `make bench BEFORE=%s` (three alternating rounds; VmRSS 3 s into a run heartbeating every 200 ms, in MB, and in brackets its anonymous part; CPU: user + system of `whimbrel-run --no-guard -- true` and its command, from rusage, the mean of %d runs, in ms, with this machine's `AWS_CA_BUNDLE` in its environment as a launcher passes it). Target: %.0f MB on DynamoDB.\n\n",
		beforeAfterHeading, before, containerTags, before, cpuRuns, float64(rssTarget)/1024)
	fmt.Fprintf(b, "| whimbrel-run | binary | resident (anonymous) on DynamoDB | resident (anonymous) on sqlite | CPU per run on DynamoDB Local, ms | CPU per run on sqlite, ms |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	for i, name := range names {
		ws := runs[i]
		fmt.Fprintf(b, "| %s | %.1f MB | %s | %s | %s | %s |\n", name, float64(ws[0].size)/(1<<20), mb(ws, dyn), mb(ws, lite),
			cpu(ws, func(w wrapperRSS) time.Duration { return w.cpuDynamoDB }), cpu(ws, func(w wrapperRSS) time.Duration { return w.cpuSQLite }))
	}
	fmt.Fprintln(b)
	return nil
}
