package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/internal/attr"
)

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// get reads one item by its key values; nil if absent.
func (st *Store) get(ctx context.Context, q querier, base string, key ...string) (attr.Item, error) {
	t := tableOf(base)
	var where []string
	args := make([]any, len(key))
	for i, k := range t.keys {
		where = append(where, `"`+k+`" = ?`)
		args[i] = key[i]
	}
	var raw string
	err := q.QueryRowContext(ctx, fmt.Sprintf(`SELECT item FROM %s WHERE %s`, st.name(base), strings.Join(where, " AND ")), args...).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, st.translate(err)
	}
	return decodeJSON(st.prefix+base, key, raw)
}

// decodeJSON reads an item as the store keeps it; key is what its key
// columns hold, to name it when it cannot be read.
func decodeJSON(table string, key []string, raw string) (attr.Item, error) {
	var it attr.Item
	if err := json.Unmarshal([]byte(raw), &it); err != nil {
		return nil, keyed(&state.DecodeError{Table: table, Attr: "(the whole item)", Err: "not DynamoDB JSON: " + err.Error()}, key)
	}
	if it == nil {
		return nil, keyed(&state.DecodeError{Table: table, Attr: "(the whole item)", Err: "null, not an item"}, key)
	}
	return it, nil
}

// keyed names a malformed item by its key columns when its attributes did
// not: a row written by another client may hold keys its item lacks.
func keyed(err error, key []string) error {
	var de *state.DecodeError
	if errors.As(err, &de) && de.Key == "" && len(key) > 0 {
		de.Key = strings.Join(key, " / ")
		de.ID = key[0]
	}
	return err
}

// put writes an item, with its key and derived columns.
func (st *Store) put(ctx context.Context, q querier, base string, it attr.Item) error {
	t := tableOf(base)
	cols := append(append([]string(nil), t.keys...), t.derived...)
	args := make([]any, 0, len(cols)+1)
	for _, c := range cols {
		args = append(args, column(it[c]))
	}
	raw, err := json.Marshal(it)
	if err != nil {
		return err
	}
	args = append(args, string(raw))
	var quoted []string
	for _, c := range cols {
		quoted = append(quoted, `"`+c+`"`)
	}
	_, err = q.ExecContext(ctx, fmt.Sprintf(`INSERT OR REPLACE INTO %s (%s, item) VALUES (%s?)`,
		st.name(base), strings.Join(quoted, ", "), strings.Repeat("?, ", len(cols))), args...)
	return st.translate(err)
}

// translate names a missing table and what to do about it: the store's
// file exists, but Whimbrel's tables were never installed in it under
// this prefix.
func (st *Store) translate(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	i := strings.Index(msg, "no such table: ")
	if i < 0 {
		return err
	}
	table := strings.Fields(msg[i+len("no such table: "):] + " ")[0]
	return &state.TableMissingError{Table: strings.Trim(table, `"`), Prefix: st.prefix, Store: "sqlite:" + st.path, Err: err}
}

// column is what a derived column holds of an attribute: text for a String,
// a number for a Number, NULL otherwise (so a malformed item falls out of
// the indexes, as it would in DynamoDB's).
func column(v attr.Value) any {
	switch v := v.(type) {
	case attr.S:
		return string(v)
	case attr.N:
		if f, err := strconv.ParseFloat(string(v), 64); err == nil {
			return f
		}
	}
	return nil
}

// tx runs fn in one IMMEDIATE transaction: it holds the write lock from the
// start, so the read, the check and the write are atomic across processes.
//
// Waiting for the lock is done here, not by SQLite's busy handler: that one
// sleeps 1, 2, 5, … up to 100 ms between tries, so with a dozen processes
// writing (a launcher and the wrappers it started) the lock sat free while
// every writer slept, and a fan-out ran at a fifth of what the writes
// themselves cost. Here a writer tries again after a short random wait
// (lockRetryMin doubling up to lockRetryMax), up to BusyTimeout.
func (st *Store) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	conn, err := st.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	tx, err := st.begin(ctx, conn)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// How long a writer waits before trying the write lock again: a random
// time up to lockRetryMin, doubling to lockRetryMax.
const (
	lockRetryMin = 500 * time.Microsecond
	lockRetryMax = 4 * time.Millisecond
)

// begin starts an IMMEDIATE transaction on conn, trying again while
// another process holds the write lock. SQLite's busy handler is off
// while it tries (busy_timeout 0 on this connection, which the caller
// holds alone) and back on once it has the lock or gives up, for the
// statements that follow.
func (st *Store) begin(ctx context.Context, conn *sql.Conn) (*sql.Tx, error) {
	if _, err := conn.ExecContext(ctx, "PRAGMA busy_timeout = 0"); err != nil {
		return nil, st.translate(err)
	}
	defer func() {
		// Not on ctx: a cancelled call must still leave the connection
		// with its busy handler.
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf("PRAGMA busy_timeout = %d", BusyTimeout.Milliseconds()))
	}()
	deadline := time.Now().Add(BusyTimeout)
	wait := lockRetryMin
	for {
		tx, err := conn.BeginTx(ctx, nil)
		if err == nil || !busy(err) || time.Now().After(deadline) {
			return tx, err
		}
		t := time.NewTimer(rand.N(wait) + time.Microsecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, lockRetryMax)
	}
}

// busy reports whether err is SQLite's "another connection holds the
// lock" (SQLITE_BUSY, with any extended code).
func busy(err error) bool {
	var se interface{ Code() int }
	return errors.As(err, &se) && se.Code()&0xff == 5
}

// update makes one conditional write: it returns the item as written, or,
// when the condition fails, nil and the item as it was (nil if absent).
func (st *Store) update(ctx context.Context, base string, key []string, cond attr.Cond, upd attr.Update) (written, old attr.Item, err error) {
	err = st.tx(ctx, func(tx *sql.Tx) error {
		cur, err := st.get(ctx, tx, base, key...)
		if err != nil {
			return err
		}
		if cur == nil || !cond.Holds(cur) {
			old = cur
			return nil
		}
		next := cur.Clone()
		upd.Apply(next)
		if err := st.put(ctx, tx, base, next); err != nil {
			return err
		}
		written = next
		return nil
	})
	return written, old, err
}

// row is one item of a listing, with what its key columns hold.
type row struct {
	it  attr.Item
	key []string
}

// decoded passes on the decoding of a row's item, naming the row by its
// key columns if the item did not.
func (r row) decoded(err error) error { return keyed(err, r.key) }

// items runs a listing of a table: the rows that rest (the query after
// FROM, "WHERE … ORDER BY …") selects. A row whose item is not DynamoDB
// JSON is reported to skips and left out.
func (st *Store) items(ctx context.Context, base string, skips *attr.Skips, rest string, args ...any) ([]row, error) {
	t := tableOf(base)
	cols := make([]string, len(t.keys))
	for i, k := range t.keys {
		cols[i] = `"` + k + `"`
	}
	rows, err := st.db.QueryContext(ctx, fmt.Sprintf(`SELECT %s, item FROM %s %s`, strings.Join(cols, ", "), st.name(base), rest), args...)
	if err != nil {
		return nil, st.translate(err)
	}
	defer rows.Close()
	var out []row
	for rows.Next() {
		keys := make([]sql.NullString, len(t.keys))
		var raw sql.NullString
		dest := make([]any, 0, len(keys)+1)
		for i := range keys {
			dest = append(dest, &keys[i])
		}
		if err := rows.Scan(append(dest, &raw)...); err != nil {
			return nil, err
		}
		r := row{key: make([]string, len(keys))}
		for i, k := range keys {
			r.key[i] = k.String
		}
		it, err := decodeJSON(st.prefix+base, r.key, raw.String)
		if err := skips.Add(err); err != nil {
			return nil, err
		}
		if it == nil {
			continue
		}
		r.it = it
		out = append(out, r)
	}
	return out, rows.Err()
}
