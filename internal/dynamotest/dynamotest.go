// Package dynamotest connects tests to the DynamoDB Local instance that
// `make test` starts (scripts/dynamodb-local), and gives each test its own
// tables under a fresh prefix so tests run in parallel on one emulator.
package dynamotest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/google/uuid"

	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// EnvEndpoint names the variable through which the Makefile passes the
// emulator's endpoint.
const EnvEndpoint = "WHIMBREL_TEST_DYNAMODB"

// Region and the static credentials the tests use; DynamoDB Local runs with
// -sharedDb, so any would do, but child processes must agree.
const (
	Region    = "us-east-1"
	AccessKey = "whimbrel"
	SecretKey = "whimbrel"
)

// Endpoint returns the emulator's endpoint. Without one, the test is skipped
// on a developer's machine and fails under CI=true, where no test may pass
// by skipping.
func Endpoint(t testing.TB) string {
	t.Helper()
	ep := os.Getenv(EnvEndpoint)
	if ep != "" {
		return ep
	}
	msg := EnvEndpoint + " is not set: run the tests with `make test`, which starts DynamoDB Local"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// Streams returns a DynamoDB Streams client for the emulator.
func Streams(t testing.TB) *dynamodbstreams.Client {
	t.Helper()
	return dynamodbstreams.New(dynamodbstreams.Options{
		Region:       Region,
		BaseEndpoint: aws.String(Endpoint(t)),
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
	})
}

// Client returns an SDK client for the emulator.
func Client(t testing.TB) *awsdynamodb.Client {
	t.Helper()
	return ClientAt(t, Endpoint(t))
}

// ClientAt returns an SDK client for an emulator at ep.
func ClientAt(t testing.TB, ep string) *awsdynamodb.Client {
	t.Helper()
	return awsdynamodb.New(awsdynamodb.Options{
		Region:                          Region,
		BaseEndpoint:                    aws.String(ep),
		Credentials:                     credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
		DisableValidateResponseChecksum: true,
	})
}

// CallTimeout bounds each store call in tests: DynamoDB Local, shared by
// every test of a `go test -race` run on a small machine, can take far
// longer than DynamoDB to answer (an index built while others are), and a
// test must not fail for that. The default bound is tested against a
// silent endpoint, where it matters.
const CallTimeout = 2 * time.Minute

var counter atomic.Int64

// Prefix returns a table prefix no other test uses.
func Prefix(t testing.TB) string {
	name := strings.ToLower(t.Name())
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, name)
	if len(clean) > 20 {
		clean = clean[:20]
	}
	return fmt.Sprintf("t%s_%s_%d_", uuid.NewString()[:8], clean, counter.Add(1))
}

// NewStore returns a Store with its tables installed under a fresh prefix.
func NewStore(t testing.TB, opts dynamodb.Options) *dynamodb.Store {
	t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = Prefix(t)
	}
	if opts.CallTimeout == 0 {
		opts.CallTimeout = CallTimeout
	}
	st := dynamodb.New(Client(t), opts)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := st.Install(ctx, false); err != nil {
		t.Fatalf("install tables: %v", err)
	}
	return st
}

// Env is the environment a child process needs to reach the emulator
// through the SDK's default chain, with the given table prefix.
func Env(t testing.TB, prefix string) []string {
	t.Helper()
	return []string{
		"WHIMBREL_STORE=dynamodb",
		"WHIMBREL_TABLE_PREFIX=" + prefix,
		"AWS_ENDPOINT_URL_DYNAMODB=" + Endpoint(t),
		"AWS_REGION=" + Region,
		"AWS_ACCESS_KEY_ID=" + AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + SecretKey,
		"AWS_EC2_METADATA_DISABLED=true",
		"WHIMBREL_STORE_TIMEOUT=" + CallTimeout.String(),
	}
}
