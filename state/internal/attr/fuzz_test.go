package attr

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/state"
)

// FuzzDecode: items as a foreign client or a corrupted table may hold them
// (DynamoDB JSON, any shape) never make the decoders, the conditions or
// the updates panic; what decodes encodes and decodes again the same.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"activity_exec_id":{"S":"a::0b0e3c0f-5d7a-4d8e-9c43-0f6b2d7c9a51"},"workflow_exec_id":{"S":"w::0b0e3c0f-5d7a-4d8e-9c43-0f6b2d7c9a51"},"state":{"S":"RUNNING"}}`))
	f.Add([]byte(`{"activity_exec_id":{"S":"a::1"},"workflow_exec_id":{"S":"w"},"state":{"S":"QUEUED"},"start_time":{"L":[{"N":"2026"},{"N":"2"},{"N":"30"},{"N":"0"},{"N":"0"},{"N":"60.5"}]},"attempt":{"S":"x"}}`))
	f.Add([]byte(`{"state":{"N":"3"},"pending_dependencies":{"L":[{"S":"a"}]},"heartbeat_time_epoch":{"S":"soon"},"expires_at":{"N":"1e300"}}`))
	f.Add([]byte(`{"workflow_exec_id":{"S":"w::x"},"workflow_name":{"S":"w"},"state":{"S":"RUNNING"},"start_time_epoch":{"N":"-1"},"definition":{"M":{}}}`))
	f.Add([]byte(`{"activity_event_id":{"S":"a::1::2"},"activity_exec_id":{"S":"a::1"},"workflow_exec_id":{"S":"w::x"},"transition":{"S":"HEARTBEAT"},"when_epoch":{"N":"1795300000.5"},"exit_code":{"N":"3"},"outcome":{"S":"applied"}}`))
	now := time.Now()
	cursor := ""
	conds := []Cond{
		{States: []string{"RUNNING"}, Owner: "o", HeartbeatSeen: &now, NumericAttempt: true},
		{Contains: "a::1", NoPending: true, HeartbeatSeen: &time.Time{}, Match: &Match{Attr: "event_cursor", Value: cursor}},
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var it Item
		if err := it.UnmarshalJSON(b); err != nil {
			return
		}
		if a, err := DecodeActivity("t", it); err == nil {
			again, err := DecodeActivity("t", EncodeActivity(a))
			if err != nil {
				t.Fatalf("a decoded activity does not decode again: %v", err)
			}
			if again.State != a.State || again.ActivityExecID != a.ActivityExecID || again.Attempt != a.Attempt {
				t.Fatalf("round trip changed it: %+v\n%+v", a, again)
			}
		}
		named := func(err error) {
			t.Helper()
			var de *state.DecodeError
			if err != nil && (!errors.As(err, &de) || de.Attr == "" || !strings.Contains(err.Error(), de.Attr)) {
				t.Fatalf("error %v does not name the attribute", err)
			}
		}
		_, err := DecodeActivity("t", it)
		named(err)
		_, err = DecodeWorkflow("t", it)
		named(err)
		_, err = DecodeRequest("t", it)
		named(err)
		_, err = DecodeDependency("t", it)
		named(err)
		_, err = DecodeInstallStatus("t", it)
		named(err)
		_, err = DecodeRef("t", it)
		named(err)
		_, err = DecodeRegistration("t", it)
		named(err)
		_, err = DecodeEvent("t", it)
		named(err)
		if e, err := DecodeEvent("t", it); err == nil {
			again, err := DecodeEvent("t", EncodeEvent(e))
			if err != nil {
				t.Fatalf("a decoded event does not decode again: %v", err)
			}
			if state.EventCursor(again) != state.EventCursor(e) || again.Transition != e.Transition || again.Outcome != e.Outcome {
				t.Fatalf("round trip changed it: %+v\n%+v", e, again)
			}
		}
		_ = Conflict("activity", "t", "id", conds[0], it)
		for _, c := range conds {
			if c.Holds(it) {
				Update{Set: Item{"state": S(state.Running)}, FirstAttempt: true, Delete: "a::1"}.Apply(it.Clone())
			}
		}
		if _, err := it.MarshalJSON(); err != nil {
			t.Fatalf("an item read from JSON does not write back: %v", err)
		}
	})
}
