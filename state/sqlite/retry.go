package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/internal/attr"
)

// CreateActivity implements state.Store: the item is written in one
// transaction only if no item has its key.
func (st *Store) CreateActivity(ctx context.Context, a *state.ActivityExec) error {
	if err := attr.CheckNewActivity(a); err != nil {
		return fmt.Errorf("create activity: %w", err)
	}
	err := st.tx(ctx, func(tx *sql.Tx) error {
		cur, err := st.get(ctx, tx, "activity_exec", a.ActivityExecID, a.WorkflowExecID)
		if err != nil {
			return err
		}
		if cur != nil {
			return attr.Exists(st.prefix+"activity_exec", a.ActivityExecID, cur)
		}
		return st.put(ctx, tx, "activity_exec", attr.EncodeActivity(a))
	})
	if err != nil {
		return fmt.Errorf("create activity %s: %w", a.ActivityExecID, err)
	}
	return nil
}
