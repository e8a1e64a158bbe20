package schedule_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/schedule"
)

// A real EventBridge scheduled event, as the rule delivers it.
const scheduledEvent = `{"version":"0","id":"53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa","detail-type":"Scheduled Event",
"source":"aws.events","account":"123456789012","time":"2026-11-21T02:00:00Z","region":"us-east-1",
"resources":["arn:aws:events:us-east-1:123456789012:rule/EveryMinute"],"detail":{}}`

func TestScheduledEvent(t *testing.T) {
	for _, tc := range []struct {
		payload string
		want    bool
	}{
		{scheduledEvent, true},
		{`{"Records":[{"eventName":"INSERT","eventSource":"aws:dynamodb"}]}`, false},
		{`{"source":"aws.events","detail-type":"EC2 Instance State-change Notification"}`, false},
		{`not json`, false},
		{`[]`, false},
	} {
		if got := schedule.ScheduledEvent([]byte(tc.payload)); got != tc.want {
			t.Errorf("ScheduledEvent(%.40s…) = %v, want %v", tc.payload, got, tc.want)
		}
	}
}

// TestLambdaHandlerTicks: through aws-lambda-go's handler, a scheduled
// event fires the due schedule once, and a stream batch goes to the
// processor.
func TestLambdaHandlerTicks(t *testing.T) {
	st := newSQLite(t)
	if _, err := schedule.Set(testbin.Context(t), st, schedule.Spec{Name: "minutely", Definition: def(t, "etl"), Every: time.Minute,
		Start: time.Now().Add(-30 * time.Second)}, time.Now()); err != nil {
		t.Fatal(err)
	}
	var passed []string
	h := lambda.NewHandler(schedule.LambdaHandler(st, nil, func(_ context.Context, raw json.RawMessage) (any, error) {
		passed = append(passed, string(raw))
		return map[string]any{"batchItemFailures": []any{}}, nil
	}))
	out, err := h.Invoke(context.Background(), []byte(scheduledEvent))
	if err != nil {
		t.Fatal(err)
	}
	var r schedule.Report
	if err := json.Unmarshal(out, &r); err != nil || r.Started != 1 {
		t.Errorf("the tick answered %s (%v), want one run started", out, err)
	}
	if _, err := h.Invoke(context.Background(), []byte(scheduledEvent)); err != nil {
		t.Fatal(err)
	}
	if got := runsOf(t, st, "etl"); len(got) != 1 {
		t.Errorf("runs after two scheduled events in one minute: %v, want 1", got)
	}
	if _, err := h.Invoke(context.Background(), []byte(`{"Records":[]}`)); err != nil || len(passed) != 1 || !strings.Contains(passed[0], "Records") {
		t.Errorf("a stream batch was not handed on: %v %v", passed, err)
	}
}
