package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// --- the wrapper's resident memory over a longer wait

// longWaitHeading heads the wrapper's resident memory sampled over half a
// minute of heartbeats.
const longWaitHeading = "## Wrapper: resident memory over a longer wait"

// longWaitAt are the moments of a run at which its resident memory is read:
// the other sections' 3 s, and later, after the collector has run a few
// times while the wrapper heartbeats.
var longWaitAt = []time.Duration{3 * time.Second, 10 * time.Second, 30 * time.Second}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// longWaitRun is one wrapper run to sample: a build on a store.
type longWaitRun struct {
	build, store string
	binary       string
	env          []string
	rss          []rss
	err          error
}

// writeLongWait samples the resident memory of each build (before and
// after, each as make native and as the container image builds it, when
// they are at hand) heartbeating every 200 ms on DynamoDB and, for the
// builds that have it, the embedded store, at each of longWaitAt. The
// runs go side by side: their memory is their own, whatever the load.
func writeLongWait(ctx context.Context, b *strings.Builder, before, bin, leanBin, endpoint, out string) error {
	prefix := "rsslong_" + uuid.NewString()[:8] + "_"
	dyn := dynamodb.New(client(endpoint), dynamodb.Options{Prefix: prefix})
	if _, err := dyn.Install(ctx, false); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "whimbrel-rss-long-")
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
	var runs []*longWaitRun
	for _, bd := range builds {
		binary := filepath.Join(bd[1], "whimbrel-run")
		if bd[1] == "" || !fileExists(binary) {
			continue
		}
		runs = append(runs, &longWaitRun{build: bd[0], store: "DynamoDB", binary: binary, env: dynEnv})
		if !lean(binary) {
			runs = append(runs, &longWaitRun{build: bd[0], store: "sqlite", binary: binary, env: []string{"WHIMBREL_STORE=sqlite:" + dbPath}})
		}
	}
	d, _ := definition.Parse("r.yaml", []byte("name: rsslong\nactivities:\n  a: {command: [\"true\"]}\n"))
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
		last := longWaitAt[len(longWaitAt)-1]
		cmd := exec.Command(r.binary, "--heartbeat-interval", "200ms", "--heartbeat-timeout", "2s", "--", "sleep", fmt.Sprint((last + 2*time.Second).Seconds()))
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "WHIMBREL_ACTIVITY_EXEC_ID=" + state.ActivityExecIDFor(id, "a"),
			"WHIMBREL_WORKFLOW_EXEC_ID=" + id}, r.env...)
		if err := cmd.Start(); err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.rss, r.err = sampleRSS(cmd, longWaitAt)
		}()
	}
	wg.Wait()
	fmt.Fprintf(b, "%s\n\nVmRSS of each build's wrapper, in MB, and in brackets its anonymous part, read %s into one run heartbeating every 200 ms (`sleep %s`), the runs side by side (the builds of \"Wrapper: binary size and resident memory, side by side with an earlier build\"). The wrapper's binary pages unmapped after 1 s of its command come back as its heartbeats and its collector touch them.\n\n",
		longWaitHeading, durList(longWaitAt), fmt.Sprint((longWaitAt[len(longWaitAt)-1] + 2*time.Second).Seconds()))
	fmt.Fprintf(b, "| whimbrel-run | store |")
	for _, at := range longWaitAt {
		fmt.Fprintf(b, " at %s |", at)
	}
	fmt.Fprintf(b, "\n| --- | --- |%s\n", strings.Repeat(" ---: |", len(longWaitAt)))
	for _, r := range runs {
		if r.err != nil {
			return fmt.Errorf("%s on %s: %w", r.build, r.store, r.err)
		}
		fmt.Fprintf(b, "| %s | %s |", r.build, r.store)
		for _, v := range r.rss {
			fmt.Fprintf(b, " %s |", v)
		}
		fmt.Fprintln(b)
	}
	fmt.Fprintln(b)
	return nil
}

// sampleRSS reads a started command's resident memory at each of at
// (since now), then waits for it.
func sampleRSS(cmd *exec.Cmd, at []time.Duration) ([]rss, error) {
	start := time.Now()
	var res []rss
	var err error
	for _, d := range at {
		time.Sleep(time.Until(start.Add(d)))
		var r rss
		if r.all, err = vmRSS(cmd.Process.Pid); err == nil {
			r.anon, err = rssAnon(cmd.Process.Pid)
		}
		if err != nil {
			break
		}
		res = append(res, r)
	}
	if err != nil {
		_ = cmd.Process.Kill()
	}
	_ = cmd.Wait()
	return res, err
}

// durList is "3s, 10s and 30s".
func durList(ds []time.Duration) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = d.String()
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}
