package sqliteinbox_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/whimbrel/whimbrel/simpleapi/inbox"
	"github.com/whimbrel/whimbrel/simpleapi/inboxtest"
	"github.com/whimbrel/whimbrel/simpleapi/sqliteinbox"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/sqlite"
)

func TestConformance(t *testing.T) {
	inboxtest.Run(t, inboxtest.Harness{New: func(t *testing.T) (state.Store, inbox.Inbox) {
		st, err := sqlite.Open(filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		if _, err := st.Install(context.Background(), false); err != nil {
			t.Fatal(err)
		}
		return st, sqliteinbox.New(st)
	}})
}
