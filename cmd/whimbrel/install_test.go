package main

import (
	"bytes"
	"context"
	"errors"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
)

var binary string

func TestMain(m *testing.M) {
	// The launcher finds whimbrel-run beside itself.
	testbin.Main(func(dir string) int {
		binary = filepath.Join(dir, "whimbrel")
		return m.Run()
	}, nil, map[string]string{"whimbrel": ".", "whimbrel-run": "../whimbrel-run", "whimbrel-launcher": "../whimbrel-launcher",
		"whimbrel-monitor": "../whimbrel-monitor", "whimbrel-poller": "../whimbrel-poller"})
}

// whimbrel runs the built binary with env added to a clean environment.
func whimbrel(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	// Outside the source tree: a .whimbrel/state.db that `make demo` left
	// at its root would otherwise be the store of every command.
	cmd.Dir = t.TempDir()
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run whimbrel: %v", err)
	}
	return out.String(), errb.String(), code
}

func TestInstallCommand(t *testing.T) {
	t.Parallel()
	prefix := dynamotest.Prefix(t)
	env := dynamotest.Env(t, prefix)

	out, errOut, code := whimbrel(t, env, "install", "--dry-run")
	if code != 0 || strings.Count(out, "would table "+prefix) != 30 || strings.Count(out, ": enable TTL on expires_at\n") != 8 {
		t.Fatalf("dry run: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	out, errOut, code = whimbrel(t, env, "install")
	if code != 0 || strings.Count(out, ": create\n") != 11 || strings.Count(out, ": record version 4\n") != 11 || strings.Count(out, ": enable TTL on expires_at\n") != 8 {
		t.Fatalf("install: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if errOut != "" {
		t.Errorf("install wrote to stderr: %s", errOut)
	}
	client := dynamotest.Client(t)
	if _, err := client.DescribeTable(context.Background(), &awsdynamodb.DescribeTableInput{
		TableName: aws.String(prefix + "activity_exec")}); err != nil {
		t.Errorf("after install: %v", err)
	}

	out, errOut, code = whimbrel(t, env, "install")
	if code != 0 || !strings.HasPrefix(out, "nothing to do") {
		t.Fatalf("second install: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	// --prefix overrides the environment.
	other := dynamotest.Prefix(t)
	out, _, code = whimbrel(t, env, "install", "--prefix", other, "--dry-run")
	if code != 0 || !strings.Contains(out, other+"workflow_exec") {
		t.Errorf("--prefix: exit %d\n%s", code, out)
	}
}

func TestInstallCommandErrors(t *testing.T) {
	t.Parallel()
	env := dynamotest.Env(t, dynamotest.Prefix(t))
	tests := []struct {
		name     string
		env      []string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"unknown store", []string{"WHIMBREL_STORE=mysql"}, []string{"install"}, 2, `store "mysql" is not one Whimbrel knows`},
		{"sqlite without a file", []string{"WHIMBREL_STORE=sqlite:"}, []string{"install"}, 2, `names no file`},
		{"bad prefix", nil, []string{"install", "--prefix", "no spaces"}, 2, `table prefix "no spaces"`},
		{"typo", nil, []string{"instal"}, 2, `did you mean "install"`},
		{"unreachable endpoint", []string{"AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:1", "AWS_MAX_ATTEMPTS=1"}, []string{"install"}, 3, "DynamoDB at http://127.0.0.1:1 could not be reached for DescribeTable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := whimbrel(t, append(append([]string{}, env...), tc.env...), tc.args...)
			if code != tc.wantCode || !strings.Contains(errOut, tc.wantErr) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and %q", code, errOut, tc.wantCode, tc.wantErr)
			}
		})
	}
}

// TestEveryBinaryExplainsItself: --version and --help with examples.
func TestEveryBinaryExplainsItself(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"whimbrel", "whimbrel-run", "whimbrel-launcher", "whimbrel-monitor"} {
		bin := filepath.Join(filepath.Dir(binary), name)
		out, err := exec.Command(bin, "--version").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) == "" {
			t.Errorf("%s --version: %v %q", name, err, out)
		}
		out, err = exec.Command(bin, "--help").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Examples:") || !strings.Contains(string(out), name) {
			t.Errorf("%s --help has no examples: %v\n%s", name, err, out)
		}
	}
}
