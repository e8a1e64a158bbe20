package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/workflow"
)

// --- the wrapper's resident memory over a long wait, broken down

var (
	onlyWrapWait = flag.Bool("wrap-wait", false, "measure the wrapper's resident memory over a long wait only (VmRSS, RssAnon, RssFile, the binary's pages, threads, CPU per minute of waiting), with the binaries of -bin and, if given, of -before side by side, and print its section")
	wrapWaitAt   = flag.String("wrap-wait-at", "3s,10s,30s,60s", "for -wrap-wait: when into each run to read its memory")
	wrapWaitBeat = flag.Duration("wrap-wait-beat", 200*time.Millisecond, "for -wrap-wait: the wrappers' heartbeat interval")
	wrapWaitPoll = 5 * time.Millisecond // between readings for the highest
	wrapWaitKeep = flag.String("wrap-wait-smaps", "", "for -wrap-wait: a folder to copy each wrapper's /proc/PID/smaps into at each reading, for a breakdown by hand")
)

// wrapWaitHeading heads the -wrap-wait section.
const wrapWaitHeading = "## Wrapper: resident memory over a long wait, broken down"

// waitSample is what one reading of a waiting wrapper holds, in kB, and
// its CPU time since its start.
type waitSample struct {
	rss, anon, file, shmem int
	text, rodata           int // the binary's resident pages: executable, and read-only data
	threads                int
	cpu                    time.Duration // on the CPU since its start, all its threads
}

func (s waitSample) String() string {
	mb := func(kb int) string { return fmt.Sprintf("%.1f", float64(kb)/1024) }
	shmem := "" // RssShmem, shown when there is any
	if s.shmem > 0 {
		shmem = " + " + mb(s.shmem) + " shmem"
	}
	return fmt.Sprintf("%s (%s + %s%s; bin %s + %s; %dT)", mb(s.rss), mb(s.anon), mb(s.file), shmem, mb(s.text), mb(s.rodata), s.threads)
}

// readStatus reads pid's memory totals from /proc/PID/status.
func readStatus(pid int) (waitSample, error) {
	var s waitSample
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	parseStatus(&s, st)
	return s, nil
}

// parseStatus reads the totals of /proc/PID/status into s.
func parseStatus(s *waitSample, st []byte) {
	for _, l := range strings.Split(string(st), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.Atoi(f[0])
		switch k {
		case "VmRSS":
			s.rss = n
		case "RssAnon":
			s.anon = n
		case "RssFile":
			s.file = n
		case "RssShmem":
			s.shmem = n
		case "Threads":
			s.threads = n
		}
	}
}

// readWaitSample reads pid's memory from /proc: status for the totals,
// smaps for the binary's own mappings, stat for its CPU.
func readWaitSample(pid int) (waitSample, error) {
	s, err := readStatus(pid)
	if err != nil {
		return s, err
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return s, err
	}
	smaps, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return s, err
	}
	var into *int
	for _, l := range strings.Split(string(smaps), "\n") {
		f := strings.Fields(l)
		if len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			into = nil
			if len(f) >= 6 && strings.Join(f[5:], " ") == exe && len(f[1]) == 4 && f[1][1] != 'w' {
				if f[1][2] == 'x' {
					into = &s.text
				} else {
					into = &s.rodata
				}
			}
			continue
		}
		if into != nil && len(f) == 3 && f[0] == "Rss:" {
			n, _ := strconv.Atoi(f[1])
			*into += n
		}
	}
	// The CPU time of each of its threads, in nanoseconds (schedstat's
	// first field): /proc/PID/stat counts in clock ticks of 10 ms, too
	// coarse for a wrapper that beats a few times a minute.
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return s, err
	}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, task.Name()))
		if err != nil {
			continue // the thread ended
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			s.cpu += time.Duration(ns)
		}
	}
	return s, nil
}

// wrapWaitRun is one wrapper run to sample: a build on a store.
type wrapWaitRun struct {
	build, store, binary string
	env                  []string
	samples              []waitSample
	peak                 waitSample // the highest reading between the last two
	mean                 int        // the mean VmRSS of the readings between the last two, kB
	err                  error
}

// printWrapWait runs each build's wrapper (before and after, each as make
// native and as the container image builds it, when they are at hand)
// heartbeating on DynamoDB and, for the builds that have it, the embedded
// store, side by side, and reads each one's memory at every moment of
// -wrap-wait-at and its CPU between the first and the last.
func printWrapWait(ctx context.Context, b *strings.Builder, before, bin, endpoint string) error {
	var at []time.Duration
	for _, s := range strings.Split(*wrapWaitAt, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || d <= 0 || (len(at) > 0 && d <= at[len(at)-1]) {
			return fmt.Errorf("-wrap-wait-at %q: want increasing positive durations such as 3s,10s,30s,60s", *wrapWaitAt)
		}
		at = append(at, d)
	}
	if len(at) < 2 {
		return fmt.Errorf("-wrap-wait-at %q: want at least two moments, to measure the CPU between them", *wrapWaitAt)
	}
	tmp, err := os.MkdirTemp("", "whimbrel-lean-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	leanBin, err := buildLean(tmp)
	if err != nil {
		return err
	}
	prefix := "rsswait_" + uuid.NewString()[:8] + "_"
	dyn := dynamodb.New(client(endpoint), dynamodb.Options{Prefix: prefix})
	if _, err := dyn.Install(ctx, false); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "whimbrel-rss-wait-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	dbPath := filepath.Join(dir, "state.db")
	lite, err := sqlite.Open(dbPath, sqlite.Options{})
	if err != nil {
		return err
	}
	defer lite.Close()
	if _, err := lite.Install(ctx, false); err != nil {
		return err
	}
	builds := [][2]string{{"before", before}, {"after", bin}, {"before, container build", filepath.Join(before, "lean")}, {"after, container build", leanBin}}
	dynEnv := []string{"WHIMBREL_STORE=dynamodb", "WHIMBREL_TABLE_PREFIX=" + prefix, "AWS_ENDPOINT_URL_DYNAMODB=" + endpoint,
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=whimbrel", "AWS_SECRET_ACCESS_KEY=whimbrel", "AWS_EC2_METADATA_DISABLED=true"}
	var runs []*wrapWaitRun
	for _, bd := range builds {
		binary := filepath.Join(bd[1], "whimbrel-run")
		if bd[1] == "" || !fileExists(binary) {
			continue
		}
		runs = append(runs, &wrapWaitRun{build: bd[0], store: "DynamoDB", binary: binary, env: dynEnv})
		if !lean(binary) {
			runs = append(runs, &wrapWaitRun{build: bd[0], store: "sqlite", binary: binary, env: []string{"WHIMBREL_STORE=sqlite:" + dbPath}})
		}
	}
	d, _ := definition.Parse("w.yaml", []byte("name: rsswait\nactivities:\n  a: {command: [\"true\"]}\n"))
	last := at[len(at)-1]
	sleep := fmt.Sprint((last + 2*time.Second).Seconds())
	var wg sync.WaitGroup
	for _, r := range runs {
		st := state.Store(dyn)
		if r.store == "sqlite" {
			st = lite
		}
		id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{})
		if err != nil {
			return err
		}
		cmd := exec.Command(r.binary, "--heartbeat-interval", wrapWaitBeat.String(), "--heartbeat-timeout", (10 * *wrapWaitBeat).String(), "--", "sleep", sleep)
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "WHIMBREL_ACTIVITY_EXEC_ID=" + state.ActivityExecIDFor(id, "a"),
			"WHIMBREL_WORKFLOW_EXEC_ID=" + id}, r.env...)
		if err := cmd.Start(); err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.samples, r.peak, r.mean, r.err = sampleWait(cmd, at, strings.NewReplacer(", ", "-", " ", "-").Replace(r.build+"-"+r.store))
		}()
	}
	wg.Wait()
	fmt.Fprintf(b, "%s\n\nEach build's wrapper heartbeating every %s around `sleep %s`, the runs side by side in one run (`go run ./tools/benchreport -wrap-wait`). Each cell: VmRSS in MB (RssAnon + RssFile, + RssShmem when not 0; of RssFile, the binary's resident executable + read-only pages; the process's threads). Mean and highest: of the readings of VmRSS every %s between the last two moments (a reading that falls in a heartbeat holds what the beat brings in). CPU: the wrapper's own time on the CPU (its threads' schedstat) between %s and %s, per minute.\n\n",
		wrapWaitHeading, *wrapWaitBeat, sleep, wrapWaitPoll, at[0], last)
	fmt.Fprintf(b, "| whimbrel-run | store |")
	for _, a := range at {
		fmt.Fprintf(b, " at %s |", a)
	}
	fmt.Fprintf(b, " mean, %[1]s to %[2]s | highest, %[1]s to %[2]s | CPU per minute waiting, ms |\n| --- | --- |%[3]s ---: | ---: | ---: |\n", at[len(at)-2], last, strings.Repeat(" ---: |", len(at)))
	for _, r := range runs {
		if r.err != nil {
			return fmt.Errorf("%s on %s: %w", r.build, r.store, r.err)
		}
		fmt.Fprintf(b, "| %s | %s |", r.build, r.store)
		for _, s := range r.samples {
			fmt.Fprintf(b, " %s |", s)
		}
		fmt.Fprintf(b, " %.1f | %.1f (%.1f + %.1f) |", float64(r.mean)/1024, float64(r.peak.rss)/1024, float64(r.peak.anon)/1024, float64(r.peak.file)/1024)
		used := r.samples[len(r.samples)-1].cpu - r.samples[0].cpu
		fmt.Fprintf(b, " %.1f |\n", float64(used)/float64(time.Millisecond)*float64(time.Minute)/float64(last-at[0]))
	}
	fmt.Fprintln(b)
	return nil
}

// sampleWait reads a started command's memory at each of at (since now),
// then waits for it.
func sampleWait(cmd *exec.Cmd, at []time.Duration, name string) (res []waitSample, peak waitSample, mean int, err error) {
	start := time.Now()
	sum, n := 0, 0
	for i, d := range at {
		if i == len(at)-1 && len(at) > 1 {
			// Between the last two readings, find the highest: a reading
			// that falls in a beat holds what the beat brings in.
			for time.Until(start.Add(d)) > 0 && err == nil {
				var s waitSample
				if s, err = readStatus(cmd.Process.Pid); s.rss > peak.rss {
					peak = s
				}
				if err == nil {
					sum, n = sum+s.rss, n+1
				}
				time.Sleep(wrapWaitPoll)
			}
		}
		time.Sleep(time.Until(start.Add(d)))
		var s waitSample
		if s, err = readWaitSample(cmd.Process.Pid); err != nil {
			break
		}
		res = append(res, s)
		if *wrapWaitKeep != "" {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", cmd.Process.Pid)); err == nil {
				_ = os.WriteFile(filepath.Join(*wrapWaitKeep, fmt.Sprintf("%s-%s.smaps", name, d)), b, 0o644)
			}
		}
	}
	if err != nil {
		_ = cmd.Process.Kill()
	}
	_ = cmd.Wait()
	if n > 0 {
		mean = sum / n
	}
	return res, peak, mean, err
}
