package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Pending marks. SQLite has no streams, so a package that keeps items a
// processor must apply (the Simple Lambda API's requests, in
// simpleapi/sqliteinbox) marks each one pending in the transaction that
// writes it (Tx.Mark), and the loop that applies them lists the marks
// (Marked) and clears each once the item is applied (Unmark). A marker
// left by a process killed in between is listed again, and applying the
// item again is harmless: the processor's conditional writes decide. The
// marks live in a small table of their own, so listing them never scans
// the items, which grow with every write.

// createPending creates the table of marks if it is missing: it is not
// one of the contract's tables, and stores made before it lack it.
func (st *Store) createPending(ctx context.Context, q querier) error {
	_, err := q.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+st.name("pending")+
		` (kind TEXT NOT NULL, item_key TEXT NOT NULL, since INTEGER NOT NULL, PRIMARY KEY (kind, item_key))`)
	if err != nil {
		return fmt.Errorf("create the table of pending marks: %w", err)
	}
	return nil
}

// Mark marks the item of kind with key pending, in this transaction: the
// mark is written if and only if the transaction commits.
func (t *Tx) Mark(kind string, key ...string) error {
	if err := t.st.createPending(t.ctx, t.tx); err != nil {
		return err
	}
	k, _ := json.Marshal(key)
	_, err := t.tx.ExecContext(t.ctx, `INSERT OR IGNORE INTO `+t.st.name("pending")+` (kind, item_key, since) VALUES (?, ?, ?)`,
		kind, string(k), time.Now().UnixNano())
	if err != nil {
		return fmt.Errorf("mark %s %v pending: %w", kind, key, err)
	}
	return nil
}

// Marked lists the keys of up to n items of kind marked pending, oldest
// mark first.
func (st *Store) Marked(ctx context.Context, kind string, n int) ([][]string, error) {
	if err := st.createPending(ctx, st.db); err != nil {
		return nil, err
	}
	rows, err := st.db.QueryContext(ctx, `SELECT item_key FROM `+st.name("pending")+` WHERE kind = ? ORDER BY since, item_key LIMIT ?`, kind, n)
	if err != nil {
		return nil, fmt.Errorf("list the pending %s: %w", kind, err)
	}
	defer rows.Close()
	var out [][]string
	for rows.Next() {
		var raw string
		if err := rows.Scan(&raw); err != nil {
			return nil, fmt.Errorf("list the pending %s: %w", kind, err)
		}
		var key []string
		if err := json.Unmarshal([]byte(raw), &key); err != nil {
			return nil, fmt.Errorf("list the pending %s: the mark %q is not a key: %w", kind, raw, err)
		}
		out = append(out, key)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list the pending %s: %w", kind, err)
	}
	return out, nil
}

// Unmark clears the mark of the item of kind with key; clearing a mark
// that is not there does nothing.
func (st *Store) Unmark(ctx context.Context, kind string, key ...string) error {
	k, _ := json.Marshal(key)
	return st.Do(ctx, func(t *Tx) error {
		if err := st.createPending(ctx, t.tx); err != nil {
			return err
		}
		if _, err := t.tx.ExecContext(ctx, `DELETE FROM `+st.name("pending")+` WHERE kind = ? AND item_key = ?`, kind, string(k)); err != nil {
			return fmt.Errorf("clear the pending mark of %s %v: %w", kind, key, err)
		}
		return nil
	})
}
