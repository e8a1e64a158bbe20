package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/internal/fuzzitem"
	"github.com/whimbrel/whimbrel/state/sqlite"
)

// FuzzDecodeRow: rows of any shape, as another client may insert them (an
// item of any attributes and types in DynamoDB JSON, or text that is not
// JSON at all), read back through the store's own reads and listings:
// nothing panics, and every error names the attribute.
func FuzzDecodeRow(f *testing.F) {
	for _, seed := range []string{"", "\x00\x05\x10\x02\x04\x06", "\x01\x14\x05\x04\x07\x01\x02\x03\x04\x05\x06", "\x08{not json", "\x08null"} {
		f.Add([]byte(seed))
	}
	st, err := sqlite.Open(filepath.Join(f.TempDir(), "fuzz.db"), sqlite.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	if _, err := st.Install(context.Background(), false); err != nil {
		f.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+st.Path()+"?_pragma=busy_timeout(10000)")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx := context.Background()
		it := fuzzitem.Item(data)
		var text string
		if len(data) > 0 && data[0]%8 == 0 {
			text = string(data[1:]) // not an item at all, most of the time
		} else {
			m := map[string]any{}
			for k, v := range it {
				m[k] = jsonValue(v)
			}
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			text = string(b)
		}
		// The key and index columns as such a client may set them: from
		// the item where it holds a String (or Number), unique otherwise.
		i := n.Add(1)
		col := func(name, fallback string) any {
			switch v := it[name].(type) {
			case string:
				return v + fmt.Sprint("#", i) // unique per row
			case fuzzitem.Num:
				return string(v)
			}
			return fallback
		}
		wf := fmt.Sprintf("w::%d", i)
		id := fmt.Sprint(col("activity_exec_id", fmt.Sprint("a::", i)))
		if _, err := db.Exec(`INSERT INTO "whimbrel_activity_exec" (activity_exec_id, workflow_exec_id, state, state_time_epoch, item) VALUES (?, ?, ?, ?, ?)`,
			id, wf, col("state", "READY"), col("state_time_epoch", "1"), text); err != nil {
			t.Fatal(err)
		}
		check := func(what string, err error) {
			t.Helper()
			bad, other := state.Skipped(err)
			if other != nil {
				var de *state.DecodeError
				if !errors.As(other, &de) {
					t.Fatalf("%s: error %v (%T) is not a decode error", what, other, other)
				}
				bad = []*state.DecodeError{de}
			}
			for _, de := range bad {
				if de.Attr == "" || !strings.Contains(de.Error(), de.Attr) || de.Key == "" {
					t.Fatalf("%s: error %v does not name the item and the attribute", what, de)
				}
			}
		}
		acts, err := st.Activities(ctx, wf)
		check("Activities", err)
		if bad, _ := state.Skipped(err); len(acts)+len(bad) != 1 {
			t.Fatalf("Activities returned %d items and skipped %d of the one row: a row was dropped silently", len(acts), len(bad))
		}
		_, err = st.GetActivity(ctx, state.ActivityKey{ActivityExecID: id, WorkflowExecID: wf})
		check("GetActivity", err)
		_, err = st.ActivitiesInState(ctx, state.ActivityQuery{State: state.Ready, Limit: 5})
		check("ActivitiesInState", err)
		if _, err := db.Exec(`DELETE FROM "whimbrel_activity_exec" WHERE workflow_exec_id = ?`, wf); err != nil {
			t.Fatal(err)
		}
	})
}

// jsonValue writes a fuzzitem value in DynamoDB JSON, as the store keeps it.
func jsonValue(v any) any {
	switch v := v.(type) {
	case string:
		return map[string]any{"S": v}
	case fuzzitem.Num:
		return map[string]any{"N": string(v)}
	case bool:
		return map[string]any{"BOOL": v}
	case []any:
		l := []any{}
		for _, e := range v {
			l = append(l, jsonValue(e))
		}
		return map[string]any{"L": l}
	case []string:
		return map[string]any{"SS": v}
	case map[string]any:
		m := map[string]any{}
		for k, e := range v {
			m[k] = jsonValue(e)
		}
		return map[string]any{"M": m}
	case fuzzitem.NumSet:
		return map[string]any{"NS": []string(v)}
	case fuzzitem.Binary:
		return map[string]any{"B": base64.StdEncoding.EncodeToString(v)}
	case fuzzitem.BinarySet:
		var out []string
		for _, b := range v {
			out = append(out, base64.StdEncoding.EncodeToString(b))
		}
		return map[string]any{"BS": out}
	}
	return map[string]any{"NULL": true}
}
