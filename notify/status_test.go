package notify_test

import (
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/inspect"
	"github.com/whimbrel/whimbrel/notify"
)

// TestUndeliveredShownInStatus: a notification its receiver refuses is
// shown by whimbrel status with its state, attempts and last error (what
// the receiver said, terminal escapes made inert), and the webhook's
// host but not its path, which may hold its token.
func TestUndeliveredShownInStatus(t *testing.T) {
	t.Parallel()
	st := open(t, "sqlite")
	rcv := newReceiver(t, func(int) int { return 502 })
	id := start(t, st, def(t, "refused", rcv.URL+"/T0/secret-token", "failed", "deadline: 1h\n"))
	fail(t, st, id)
	d := deliverer(st, notify.Config{})
	until(t, "two tries", func() bool { d.Once(ctx(t)); return len(rcv.all()) >= 2 })
	s, err := inspect.Load(ctx(t), st, id, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := s.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"notifications", "failed", "PENDING", "attempt(s)", "next try", "last error: webhook", "502 Bad Gateway", "deadline"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "secret-token") {
		t.Errorf("status shows the webhook's path:\n%s", out)
	}
}
