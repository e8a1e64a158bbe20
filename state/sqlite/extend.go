package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/codec"
	"github.com/whimbrel/whimbrel/state/internal/attr"
)

// Extending the store. A package that keeps items of its own in the
// contract's tables (the Simple Lambda API's inbox, simpleapi/sqliteinbox)
// reads and writes them as the Store does: items of the shared codec
// (package state/codec), in IMMEDIATE transactions (Do), and may make an
// activity write together with writes of its own in one transaction
// (UpdateActivityWith). Tables are named by their base name
// ("activity_event"); the store adds its prefix.

// Tx is one transaction on the store's items (see Do).
type Tx struct {
	st  *Store
	ctx context.Context
	tx  *sql.Tx
}

// Do runs fn in one IMMEDIATE transaction, which commits if fn returns
// nil and rolls back otherwise; fn's error is returned as it is.
func (st *Store) Do(ctx context.Context, fn func(*Tx) error) error {
	return st.tx(ctx, func(tx *sql.Tx) error { return fn(&Tx{st: st, ctx: ctx, tx: tx}) })
}

// Get reads an item by the values of its table's key columns, in order;
// nil if there is none.
func (t *Tx) Get(base string, key ...string) (codec.Item, error) {
	return t.st.get(t.ctx, t.tx, base, key...)
}

// Put writes an item, replacing any of its key.
func (t *Tx) Put(base string, it codec.Item) error { return t.st.put(t.ctx, t.tx, base, it) }

// Get reads an item outside a transaction; nil if there is none.
func (st *Store) Get(ctx context.Context, base string, key ...string) (codec.Item, error) {
	return st.get(ctx, st.db, base, key...)
}

// Row is one item of a listing (Items).
type Row struct {
	Item codec.Item
	key  []string
}

// Decoded passes on the error of decoding a row's item, naming the row by
// its key columns if the error does not.
func (r Row) Decoded(err error) error { return keyed(err, r.key) }

// Items lists the rows of a table that rest selects (the query after FROM:
// "WHERE … ORDER BY …", with args). A row whose item is not DynamoDB JSON
// is reported to skips and left out.
func (st *Store) Items(ctx context.Context, base string, skips *codec.Skips, rest string, args ...any) ([]Row, error) {
	rows, err := st.items(ctx, base, skips, rest, args...)
	out := make([]Row, len(rows))
	for i, r := range rows {
		out[i] = Row{Item: r.it, key: r.key}
	}
	return out, err
}

// Undecoded reports the items a read could not decode, in the store's log
// (see state.Store).
func (st *Store) Undecoded() *codec.Reporter { return st.undecoded }

// UpdateActivityWith makes the activity write c, with the compare-and-set
// swap (nil: none) on the same item, and also (nil: nothing) in the same
// transaction: all of them or none. also runs once the activity's
// condition held; its error undoes the write and is returned as it is.
// It returns the activity as written; when its condition fails, what
// UpdateActivity returns.
func (st *Store) UpdateActivityWith(ctx context.Context, key state.ActivityKey, c state.ActivityChange, swap *codec.Swap, also func(*Tx) error) (*state.ActivityExec, error) {
	cond, upd, err := attr.ActivityChangeWith(c, swap)
	if err != nil {
		return nil, fmt.Errorf("update activity %s: %w", key.ActivityExecID, err)
	}
	if also == nil {
		a, _, err := st.updateActivity(ctx, key, cond, upd)
		return a, err
	}
	var written attr.Item
	var alsoErr error
	err = st.Do(ctx, func(t *Tx) error {
		cur, err := t.Get("activity_exec", activityKey(key)...)
		if err != nil {
			return err
		}
		if cur == nil || !cond.Holds(cur) {
			return attr.Conflict("activity", st.prefix+"activity_exec", key.ActivityExecID, cond, cur)
		}
		if alsoErr = also(t); alsoErr != nil {
			return alsoErr
		}
		next := cur.Clone()
		upd.Apply(next)
		if err := t.Put("activity_exec", next); err != nil {
			return err
		}
		written = next
		return nil
	})
	if err != nil {
		var ce *state.ConflictError
		var nf *state.NotFoundError
		var ie *state.DecodeError
		if alsoErr != nil || errors.As(err, &ce) || errors.As(err, &nf) || errors.As(err, &ie) {
			return nil, err
		}
		return nil, fmt.Errorf("update activity %s: %w", key.ActivityExecID, err)
	}
	return st.lenient(written)
}
