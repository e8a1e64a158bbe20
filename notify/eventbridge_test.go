package notify_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/notify"
	"github.com/whimbrel/whimbrel/workflow"
)

// putEvent is one entry a fake EventBridge took.
type putEvent struct {
	Source, DetailType, Detail, EventBusName string
}

// TestEventBridge: a failed run's notification is put on the bus through
// the SDK's EventBridge client against a fake endpoint speaking PutEvents;
// an entry the bus fails is tried again with the same delivery ID in its
// detail.
func TestEventBridge(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var took []putEvent
	calls := 0
	bus := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") != "AWSEvents.PutEvents" {
			http.Error(w, "not PutEvents", http.StatusBadRequest)
			return
		}
		raw, _ := io.ReadAll(r.Body)
		var in struct{ Entries []putEvent }
		_ = json.Unmarshal(raw, &in)
		mu.Lock()
		defer mu.Unlock()
		calls++
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		if calls == 1 {
			_, _ = io.WriteString(w, `{"FailedEntryCount":1,"Entries":[{"ErrorCode":"InternalFailure","ErrorMessage":"try again"}]}`)
			return
		}
		took = append(took, in.Entries...)
		_, _ = io.WriteString(w, `{"FailedEntryCount":0,"Entries":[{"EventId":"e-1"}]}`)
	}))
	t.Cleanup(bus.Close)
	st := open(t, "sqlite")
	d, err := definition.Parse("t.yaml", []byte(`name: bussed
activities:
  extract: {command: ["true"]}
  load: {command: ["true"], depends_on: [extract]}
notify:
  - on: [failed]
    eventbridge: {bus: ops, source: whimbrel.test}
`))
	if err != nil {
		t.Fatal(err)
	}
	id := start(t, st, d)
	fail(t, st, id)
	run(t, deliverer(st, notify.Config{EventBridgeEndpoint: bus.URL}))
	until(t, "an event put", func() bool { mu.Lock(); defer mu.Unlock(); return len(took) > 0 })
	mu.Lock()
	defer mu.Unlock()
	e := took[0]
	var b workflow.Body
	if err := json.Unmarshal([]byte(e.Detail), &b); err != nil {
		t.Fatal(err)
	}
	if len(took) != 1 || e.EventBusName != "ops" || e.Source != "whimbrel.test" || e.DetailType != "Whimbrel workflow failed" ||
		b.WorkflowExecID != id || b.DeliveryID == "" || len(b.Failed) != 1 || calls != 2 {
		t.Errorf("put %d events in %d calls: %+v", len(took), calls, e)
	}
}
