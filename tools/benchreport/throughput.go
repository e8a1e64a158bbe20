package main

// throughput is what measureThroughput found: activities per second and
// CPU per activity, by number of launchers.
import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/workflow"
)

type throughput struct {
	perSecond map[int]float64 // activities completed per second, by launchers
	// cpu is the user + system time of the launchers and every process
	// they reaped (the wrappers, their guards and commands) per activity,
	// by launchers.
	cpu    map[int]time.Duration
	writes float64 // conditional writes per second DynamoDB Local sustains
}

func storeEnv(prefix, endpoint string) []string {
	return []string{"PATH=" + os.Getenv("PATH"), "WHIMBREL_LOG_LEVEL=warn", "WHIMBREL_STORE=dynamodb", "WHIMBREL_TABLE_PREFIX=" + prefix,
		"AWS_ENDPOINT_URL_DYNAMODB=" + endpoint, "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=whimbrel",
		"AWS_SECRET_ACCESS_KEY=whimbrel", "AWS_EC2_METADATA_DISABLED=true"}
}

func measureThroughput(ctx context.Context, bin, endpoint string, n int) (throughput, error) {
	res := throughput{perSecond: map[int]float64{}, cpu: map[int]time.Duration{}}
	d, err := trueActivities("trivial", "t%04d", n)
	if err != nil {
		return res, err
	}
	for _, launchers := range []int{1, 4} {
		prefix := "tp_" + uuid.NewString()[:8] + "_"
		st := dynamodb.New(client(endpoint), dynamodb.Options{Prefix: prefix})
		if _, err := st.Install(ctx, false); err != nil {
			return res, err
		}
		dir, err := os.MkdirTemp("", "throughput")
		if err != nil {
			return res, err
		}
		var procs []*exec.Cmd
		for i := 0; i < launchers; i++ {
			cmd := exec.Command(filepath.Join(bin, "whimbrel-launcher"), "--interval", "200ms", "--log-dir", dir)
			cmd.Env = storeEnv(prefix, endpoint)
			if err := cmd.Start(); err != nil {
				return res, err
			}
			procs = append(procs, cmd)
		}
		began := time.Now()
		id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{})
		if err != nil {
			return res, err
		}
		for {
			wf, err := st.GetWorkflow(ctx, id)
			if err != nil {
				return res, err
			}
			if wf.State.Terminal() {
				if wf.State != state.WorkflowCompleted {
					return res, fmt.Errorf("the throughput workflow %s: %s", wf.State, wf.Reason)
				}
				break
			}
			if time.Since(began) > 10*time.Minute {
				return res, fmt.Errorf("the throughput workflow did not finish")
			}
			time.Sleep(50 * time.Millisecond)
		}
		res.perSecond[launchers] = float64(n) / time.Since(began).Seconds()
		var cpu time.Duration
		for _, p := range procs {
			_ = p.Process.Kill()
			_ = p.Wait()
			if ru, ok := p.ProcessState.SysUsage().(*syscall.Rusage); ok {
				cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
			}
		}
		res.cpu[launchers] = cpu / time.Duration(n)
		os.RemoveAll(dir)
	}

	res.writes, err = measureRawWrites(ctx, endpoint)
	return res, err
}

// measureRawWrites is the rate of conditional writes DynamoDB Local
// sustains: heartbeats (one conditional UpdateItem each) from 4
// goroutines for 3 seconds, per second.
func measureRawWrites(ctx context.Context, endpoint string) (float64, error) {
	prefix := "raw_" + uuid.NewString()[:8] + "_"
	st := dynamodb.New(client(endpoint), dynamodb.Options{Prefix: prefix})
	if _, err := st.Install(ctx, false); err != nil {
		return 0, err
	}
	one, _ := definition.Parse("o.yaml", []byte("name: raw\nactivities:\n  a: {command: [\"true\"]}\n"))
	id, _, err := workflow.Start(ctx, st, one, workflow.StartOptions{})
	if err != nil {
		return 0, err
	}
	k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "a"), WorkflowExecID: id}
	if _, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running, Claim: &state.Claim{Owner: "raw"}}); err != nil {
		return 0, err
	}
	var mu sync.Mutex
	count := 0
	end := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				if st.Heartbeat(ctx, k, "raw", time.Now()) == nil {
					mu.Lock()
					count++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return float64(count) / 3, nil
}

func writeThroughput(b *strings.Builder, tp throughput, n int) {
	fmt.Fprintf(b, "## Throughput\n\n%d trivial activities (`true`, all ready at once) completed end to end by whimbrel-launcher processes with the local backend, each through its own whimbrel-run, against the rate of conditional writes DynamoDB Local sustains in the same run (4 writers, one conditional UpdateItem each):\n\n", n)
	fmt.Fprintf(b, "| launchers | activities per second | ÷ conditional writes per second |\n| ---: | ---: | ---: |\n")
	for _, l := range []int{1, 4} {
		fmt.Fprintf(b, "| %d | %.1f | %.3f |\n", l, tp.perSecond[l], tp.perSecond[l]/tp.writes)
	}
	fmt.Fprintf(b, "\nDynamoDB Local sustained %.0f conditional writes per second. On 2 cores each activity's wrapper process (start, claim, run, record, advance) is the bound, not the store.\n\n", tp.writes)
}
