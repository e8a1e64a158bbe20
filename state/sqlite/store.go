// Package sqlite is the state.Store on one SQLite file, through a pure-Go
// driver (modernc.org/sqlite: no cgo, so the binaries stay static). It is
// the zero-setup store for local runs: many processes on one machine
// (wrappers, a launcher, a monitor) share it safely, because every write is
// one IMMEDIATE transaction that reads the item, evaluates the same
// condition the DynamoDB store sends to DynamoDB, and writes the item back.
// WAL lets readers go on meanwhile; a busy timeout makes writers queue.
//
// Items are kept as DynamoDB JSON beside the columns the queries need, so
// both stores share one codec and behave alike; the conformance suite
// checks it.
package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/internal/attr"
)

// BusyTimeout is how long a writer waits for another process's write.
const BusyTimeout = 30 * time.Second

// schemaVersion is recorded in install_status for every table.
const schemaVersion = 2

// Options configure a Store.
type Options struct {
	Prefix string       // prepended to every table name (default state.DefaultTablePrefix)
	Logger hclog.Logger // default: none
}

// Store is the state.Store on SQLite.
type Store struct {
	db     *sql.DB
	path   string
	prefix string
	log    hclog.Logger
	// undecoded reports the items a read could not decode.
	undecoded *attr.Reporter
}

var (
	_ state.Store     = (*Store)(nil)
	_ state.Installer = (*Store)(nil)
)

// Open opens (creating if needed) the database file at path. Install
// creates the tables.
func Open(path string, opts Options) (*Store, error) {
	if opts.Prefix == "" {
		opts.Prefix = state.DefaultTablePrefix
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if path == "" {
		return nil, errors.New("sqlite store: no file given: use sqlite:PATH")
	}
	// The store holds params, outputs and the tails of stderr: only its
	// user may read it, whatever the umask. SQLite gives the -wal and
	// -shm files the mode of the database file, so creating that one
	// 0600 before SQLite opens it covers all three. A folder or file that
	// exists keeps its mode: its owner chose it.
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("sqlite store: create %s: %w", dir, err)
		}
	}
	if f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600); err == nil {
		f.Close()
	} else if !errors.Is(err, fs.ErrExist) && !errors.Is(err, fs.ErrPermission) {
		return nil, fmt.Errorf("sqlite store: create %s: %w", path, err)
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite store %s: %w", path, err)
	}
	// One connection per process: SQLite lets one writer in at a time
	// anyway, and within a process the pool then queues writers in order
	// instead of leaving them to the busy handler's sleeps.
	db.SetMaxOpenConns(1)
	// Turning a new file to WAL takes a lock the busy timeout does not
	// wait for; processes opening one file at once try again.
	deadline := time.Now().Add(BusyTimeout)
	for {
		err = db.Ping()
		if err == nil || !strings.Contains(err.Error(), "database is locked") || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite store %s: %w", path, err)
	}
	return &Store{db: db, path: path, prefix: opts.Prefix, log: opts.Logger, undecoded: attr.NewReporter(opts.Logger)}, nil
}

// Close closes the database.
func (st *Store) Close() error { return st.db.Close() }

// Path is the database file.
func (st *Store) Path() string { return st.path }

// Prefix returns the table prefix.
func (st *Store) Prefix() string { return st.prefix }

// table describes one table: its key columns, and the columns derived from
// the item that the queries use.
type table struct {
	base    string
	keys    []string
	derived []string // copied from the item on every write
	indexes [][]string
}

// tables are the store's tables, all listed here, in the order Install
// creates them.
var tables = []table{
	{base: state.TableInstallStatus, keys: []string{"object_id", "object_type"}},
	{base: state.TableWorkflowRequest, keys: []string{"workflow_request_id", "workflow_name"}},
	{base: state.TableActivityEvent, keys: []string{"activity_event_id", "activity_exec_id"}, indexes: [][]string{{"activity_exec_id"}}},
	{base: state.TableWorkflowExec, keys: []string{"workflow_exec_id", "workflow_name"},
		derived: []string{"state", "start_time_epoch"}, indexes: [][]string{{"state", "start_time_epoch"}, {"workflow_name", "start_time_epoch"}}},
	{base: state.TableActivityExec, keys: []string{"activity_exec_id", "workflow_exec_id"},
		// workflow_exec_id + state: a workflow's activities, and whether
		// any is live without reading them (AnyLive).
		derived: []string{"state", "state_time_epoch"}, indexes: [][]string{{"state", "state_time_epoch"}, {"workflow_exec_id", "state"}}},
	{base: state.TableActivityDependency, keys: []string{"activity_exec_dependency", "activity_exec_id"},
		derived: []string{"workflow_exec_id", "dependent_activity_exec_id"}, indexes: [][]string{{"dependent_activity_exec_id"}, {"workflow_exec_id"}}},
	{base: state.TableWorkflowLambda, keys: []string{"workflow_name"}},
	scheduleTable, // schedule.go
}

func tableOf(base string) table {
	for _, t := range tables {
		if t.base == base {
			return t
		}
	}
	panic("sqlite: no table " + base) // a defect in this package, never input
}

func (st *Store) name(base string) string { return `"` + st.prefix + base + `"` }

// Install implements state.Installer: it creates the missing tables and
// indexes and records their versions; a second run does nothing.
func (st *Store) Install(ctx context.Context, dryRun bool) ([]state.InstallAction, error) {
	var actions []state.InstallAction
	for _, t := range tables {
		var n int
		if err := st.db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, st.prefix+t.base).Scan(&n); err != nil {
			return actions, fmt.Errorf("install: %w", err)
		}
		if n == 0 {
			actions = append(actions, state.InstallAction{Object: "table " + st.prefix + t.base, Action: "create"})
		}
		if dryRun {
			continue
		}
		cols := append(append([]string(nil), t.keys...), t.derived...)
		var defs []string
		for _, c := range cols {
			defs = append(defs, `"`+c+`"`)
		}
		quoted := make([]string, len(t.keys))
		for i, k := range t.keys {
			quoted[i] = `"` + k + `"`
		}
		stmts := []string{fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (%s, item TEXT NOT NULL, PRIMARY KEY (%s))`,
			st.name(t.base), strings.Join(defs, ", "), strings.Join(quoted, ", "))}
		for _, ix := range t.indexes {
			var q []string
			for _, c := range ix {
				q = append(q, `"`+c+`"`)
			}
			stmts = append(stmts, fmt.Sprintf(`CREATE INDEX IF NOT EXISTS "%s%s_by_%s" ON %s (%s)`,
				st.prefix, t.base, strings.Join(ix, "_"), st.name(t.base), strings.Join(q, ", ")))
		}
		for _, s := range stmts {
			if _, err := st.db.ExecContext(ctx, s); err != nil {
				return actions, fmt.Errorf("install table %s: %w", st.prefix+t.base, err)
			}
		}
	}
	if !dryRun {
		n, err := st.purge(ctx, time.Now())
		if err != nil {
			return actions, err
		}
		if n > 0 {
			actions = append(actions, state.InstallAction{Object: "store " + st.path, Action: fmt.Sprintf("delete %d expired items", n)})
		}
	}
	for _, t := range tables {
		obj := "table " + st.prefix + t.base
		act := state.InstallAction{Object: obj, Action: fmt.Sprintf("record version %d", schemaVersion)}
		if dryRun {
			if !st.hasVersion(ctx, t.base) {
				actions = append(actions, act)
			}
			continue
		}
		wrote := false
		err := st.tx(ctx, func(tx *sql.Tx) error {
			cur, err := st.get(ctx, tx, "install_status", t.base, "table")
			if err != nil {
				return err
			}
			if cur != nil {
				s, err := attr.DecodeInstallStatus(st.prefix+"install_status", cur)
				if err != nil {
					return err
				}
				if s.Version >= schemaVersion {
					return nil
				}
			}
			wrote = true
			return st.put(ctx, tx, "install_status", attr.EncodeInstallStatus(&state.InstallStatus{
				ObjectID: t.base, ObjectType: "table", Version: schemaVersion, Description: "SQLite table " + t.base}))
		})
		if err != nil {
			return actions, fmt.Errorf("record install status of %s: %w", t.base, err)
		}
		if wrote {
			actions = append(actions, act)
		}
	}
	return actions, nil
}

func (st *Store) hasVersion(ctx context.Context, base string) bool {
	it, err := st.get(ctx, st.db, "install_status", base, "table")
	return err == nil && it != nil
}

// --- rows

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

// --- workflows

// CreateWorkflow implements state.Store, in one transaction.
func (st *Store) CreateWorkflow(ctx context.Context, w *state.NewWorkflow) error {
	if err := attr.CheckNewWorkflow(w); err != nil {
		return fmt.Errorf("create workflow %s: %w", w.Exec.WorkflowExecID, err)
	}
	err := st.tx(ctx, func(tx *sql.Tx) error {
		if r := w.Request; r != nil {
			cur, err := st.get(ctx, tx, "workflow_request", r.WorkflowRequestID, r.WorkflowName)
			if err != nil {
				return err
			}
			if cur != nil && cur["workflow_exec_id"] != attr.S(w.Exec.WorkflowExecID) {
				e := &state.ExistsError{What: "workflow request " + r.WorkflowRequestID}
				if v, ok := cur["workflow_exec_id"].(attr.S); ok {
					e.WorkflowExecID = string(v)
				}
				return e
			}
		}
		cur, err := st.get(ctx, tx, "workflow_exec", w.Exec.WorkflowExecID, w.Exec.WorkflowName)
		if err != nil {
			return err
		}
		if cur != nil && cur["state"] != attr.S(state.WorkflowRequested) {
			what := "workflow execution " + w.Exec.WorkflowExecID
			if s, ok := cur["state"].(attr.S); ok {
				what += " (" + string(s) + ")"
			}
			return &state.ExistsError{What: what, WorkflowExecID: w.Exec.WorkflowExecID}
		}
		if w.Request != nil {
			if err := st.put(ctx, tx, "workflow_request", attr.EncodeRequest(w.Request)); err != nil {
				return err
			}
		}
		if err := st.put(ctx, tx, "workflow_exec", attr.EncodeWorkflow(&w.Exec)); err != nil {
			return err
		}
		// Items an earlier attempt wrote are left as they are.
		for i := range w.Activities {
			a := &w.Activities[i]
			if err := st.putAbsent(ctx, tx, "activity_exec", attr.EncodeActivity(a), a.ActivityExecID, a.WorkflowExecID); err != nil {
				return err
			}
		}
		for i := range w.Dependencies {
			d := &w.Dependencies[i]
			if err := st.putAbsent(ctx, tx, "activity_exec_dependency", attr.EncodeDependency(d), d.ID, d.ActivityExecID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("create workflow %s: %w", w.Exec.WorkflowExecID, err)
	}
	return nil
}

func (st *Store) putAbsent(ctx context.Context, tx *sql.Tx, base string, it attr.Item, key ...string) error {
	cur, err := st.get(ctx, tx, base, key...)
	if err != nil || cur != nil {
		return err
	}
	return st.put(ctx, tx, base, it)
}

// GetWorkflow implements state.Store.
func (st *Store) GetWorkflow(ctx context.Context, id string) (*state.WorkflowExec, error) {
	name, err := state.WorkflowNameOf(id)
	if err != nil {
		return nil, fmt.Errorf("get workflow: %w", err)
	}
	it, err := st.get(ctx, st.db, "workflow_exec", id, name)
	if err != nil {
		return nil, fmt.Errorf("get workflow %s: %w", id, err)
	}
	if it == nil {
		return nil, &state.NotFoundError{Kind: "workflow", ID: id}
	}
	w, err := attr.DecodeWorkflow(st.prefix+"workflow_exec", it)
	return w, st.undecoded.Check(err)
}

// GetRequest implements state.Store.
func (st *Store) GetRequest(ctx context.Context, id, workflowName string) (*state.WorkflowRequest, error) {
	it, err := st.get(ctx, st.db, "workflow_request", id, workflowName)
	if err != nil {
		return nil, fmt.Errorf("get workflow request %s: %w", id, err)
	}
	if it == nil {
		return nil, &state.NotFoundError{Kind: "workflow request", ID: id}
	}
	r, err := attr.DecodeRequest(st.prefix+"workflow_request", it)
	return r, st.undecoded.Check(err)
}

// UpdateWorkflow implements state.Store.
func (st *Store) UpdateWorkflow(ctx context.Context, id string, c state.WorkflowChange) (*state.WorkflowExec, error) {
	name, err := state.WorkflowNameOf(id)
	if err != nil {
		return nil, fmt.Errorf("update workflow: %w", err)
	}
	cond, upd, err := attr.WorkflowChange(c)
	if err != nil {
		return nil, fmt.Errorf("update workflow %s: %w", id, err)
	}
	it, old, err := st.update(ctx, "workflow_exec", []string{id, name}, cond, upd)
	if err != nil {
		return nil, fmt.Errorf("update workflow %s: %w", id, err)
	}
	if it == nil {
		return nil, attr.Conflict("workflow", st.prefix+"workflow_exec", id, cond, old)
	}
	w, err := attr.DecodeWorkflow(st.prefix+"workflow_exec", it)
	if err != nil && w.State.Valid() {
		st.log.Warn("a workflow the store wrote has a malformed attribute", "error", err)
		return w, nil
	}
	return w, err
}

// Workflows implements state.Store.
func (st *Store) Workflows(ctx context.Context, q state.WorkflowQuery) ([]*state.WorkflowExec, error) {
	since := -1e18
	if !q.Since.IsZero() {
		since = float64(q.Since.UnixMilli()) / 1000
	}
	limit := q.Limit
	if limit <= 0 {
		limit = -1
	}
	where, args := []string{"start_time_epoch >= ?"}, []any{since}
	if q.State != "" {
		where, args = append(where, "state = ?"), append(args, string(q.State))
	}
	if q.Name != "" {
		where, args = append(where, "workflow_name = ?"), append(args, q.Name)
	}
	skips := st.undecoded.NewSkips()
	its, err := st.items(ctx, "workflow_exec", skips, fmt.Sprintf(`WHERE %s ORDER BY start_time_epoch DESC LIMIT ?`,
		strings.Join(where, " AND ")), append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	out := make([]*state.WorkflowExec, 0, len(its))
	for _, r := range its {
		w, err := attr.DecodeWorkflow(st.prefix+"workflow_exec", r.it)
		if err != nil {
			_ = skips.Add(r.decoded(err))
			continue
		}
		w.Definition = "" // as the DynamoDB index would: listings carry none
		out = append(out, w)
	}
	return out, skips.Err()
}

// --- activities

func activityKey(k state.ActivityKey) []string { return []string{k.ActivityExecID, k.WorkflowExecID} }

// GetActivity implements state.Store.
func (st *Store) GetActivity(ctx context.Context, key state.ActivityKey) (*state.ActivityExec, error) {
	it, err := st.get(ctx, st.db, "activity_exec", activityKey(key)...)
	if err != nil {
		return nil, fmt.Errorf("get activity %s: %w", key.ActivityExecID, err)
	}
	if it == nil {
		return nil, &state.NotFoundError{Kind: "activity", ID: key.ActivityExecID}
	}
	a, err := attr.DecodeActivity(st.prefix+"activity_exec", it)
	return a, st.undecoded.Check(keyed(err, activityKey(key)))
}

// Activities implements state.Store.
func (st *Store) Activities(ctx context.Context, workflowExecID string) ([]*state.ActivityExec, error) {
	skips := st.undecoded.NewSkips()
	its, err := st.items(ctx, "activity_exec", skips, `WHERE workflow_exec_id = ? ORDER BY activity_exec_id`, workflowExecID)
	if err != nil {
		return nil, fmt.Errorf("list activities of %s: %w", workflowExecID, err)
	}
	out := make([]*state.ActivityExec, 0, len(its))
	for _, r := range its {
		a, err := attr.DecodeActivity(st.prefix+"activity_exec", r.it)
		if err != nil {
			_ = skips.Add(r.decoded(err))
			continue
		}
		out = append(out, a)
	}
	return out, skips.Err()
}

// AnyLive reports whether any activity of the workflow is not terminal,
// through the index on workflow_exec_id and state, without reading the
// items: settling after each of a workflow's activities ends then costs
// the same however many it has. An item whose state is not one of the
// contract's counts as live, as listing it would not settle either.
func (st *Store) AnyLive(ctx context.Context, workflowExecID string) (bool, error) {
	terminal := make([]any, 0, len(state.ActivityStates)+1)
	terminal = append(terminal, workflowExecID)
	for _, s := range state.ActivityStates {
		if s.Terminal() {
			terminal = append(terminal, string(s))
		}
	}
	var one int
	err := st.db.QueryRowContext(ctx, fmt.Sprintf(`SELECT 1 FROM %s WHERE workflow_exec_id = ? AND (state IS NULL OR state NOT IN (%s)) LIMIT 1`,
		st.name("activity_exec"), strings.TrimSuffix(strings.Repeat("?, ", len(terminal)-1), ", ")), terminal...).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("look for live activities of %s: %w", workflowExecID, st.translate(err))
	}
	return true, nil
}

// ActivitiesInState implements state.Store.
func (st *Store) ActivitiesInState(ctx context.Context, q state.ActivityQuery) ([]state.ActivityRef, error) {
	if !q.State.Valid() || q.State.Terminal() {
		// As the DynamoDB store, whose state index holds live states only.
		return nil, fmt.Errorf("list %s activities: the state index holds live states only", q.State)
	}
	before := 1e18
	if !q.Before.IsZero() {
		before = float64(q.Before.UnixMilli()) / 1000
	}
	limit := q.Limit
	if limit <= 0 {
		limit = -1
	}
	skips := st.undecoded.NewSkips()
	its, err := st.items(ctx, "activity_exec", skips, `WHERE state = ? AND state_time_epoch < ? ORDER BY state_time_epoch LIMIT ?`,
		string(q.State), before, limit)
	if err != nil {
		return nil, fmt.Errorf("list %s activities: %w", q.State, err)
	}
	out := make([]state.ActivityRef, 0, len(its))
	for _, r := range its {
		ref, err := attr.DecodeRef(st.prefix+"activity_exec", r.it)
		if err != nil {
			_ = skips.Add(r.decoded(err))
			continue
		}
		out = append(out, ref)
	}
	return out, skips.Err()
}

// UpdateActivity implements state.Store.
func (st *Store) UpdateActivity(ctx context.Context, key state.ActivityKey, c state.ActivityChange) (*state.ActivityExec, error) {
	cond, upd, err := attr.ActivityChange(c)
	if err != nil {
		return nil, fmt.Errorf("update activity %s: %w", key.ActivityExecID, err)
	}
	a, _, err := st.updateActivity(ctx, key, cond, upd)
	if err == nil {
		st.wakeAfter(key, c)
	}
	return a, err
}

// Heartbeat implements state.Store.
func (st *Store) Heartbeat(ctx context.Context, key state.ActivityKey, owner string, at time.Time) error {
	cond, upd := attr.Heartbeat(owner, at)
	_, _, err := st.updateActivity(ctx, key, cond, upd)
	return err
}

// ResolveDependency implements state.Store.
func (st *Store) ResolveDependency(ctx context.Context, waiting state.ActivityKey, upstreamID string) (*state.ActivityExec, bool, error) {
	cond, upd := attr.ResolveDependency(upstreamID)
	it, old, err := st.update(ctx, "activity_exec", activityKey(waiting), cond, upd)
	if err != nil {
		return nil, false, fmt.Errorf("resolve dependency of %s on %s: %w", waiting.ActivityExecID, upstreamID, err)
	}
	resolved := it != nil
	if !resolved {
		if old == nil {
			return nil, false, &state.NotFoundError{Kind: "activity", ID: waiting.ActivityExecID}
		}
		it = old
	}
	a, err := st.lenient(it)
	return a, resolved, err
}

// updateActivity makes one conditional write and returns the item as
// written, or the conflict.
func (st *Store) updateActivity(ctx context.Context, key state.ActivityKey, cond attr.Cond, upd attr.Update) (*state.ActivityExec, bool, error) {
	it, old, err := st.update(ctx, "activity_exec", activityKey(key), cond, upd)
	if err != nil {
		return nil, false, fmt.Errorf("update activity %s: %w", key.ActivityExecID, err)
	}
	if it == nil {
		return nil, false, attr.Conflict("activity", st.prefix+"activity_exec", key.ActivityExecID, cond, old)
	}
	a, err := st.lenient(it)
	return a, true, err
}

// lenient decodes an item a write has touched: an attribute the write did
// not need being malformed is logged, not made a failure.
func (st *Store) lenient(it attr.Item) (*state.ActivityExec, error) {
	a, err := attr.DecodeActivity(st.prefix+"activity_exec", it)
	if err != nil && a.State.Valid() && a.ActivityExecID != "" {
		st.log.Warn("an activity the store wrote has a malformed attribute", "error", err)
		return a, nil
	}
	return a, err
}

// Expire implements state.Store. SQLite has no TTL: Install deletes the
// items whose time has come.
func (st *Store) Expire(ctx context.Context, id string, at time.Time) error {
	name, err := state.WorkflowNameOf(id)
	if err != nil {
		return fmt.Errorf("expire: %w", err)
	}
	upd := attr.Expire(at)
	return st.tx(ctx, func(tx *sql.Tx) error {
		wf, err := st.get(ctx, tx, "workflow_exec", id, name)
		if err != nil {
			return err
		}
		if wf == nil {
			return &state.NotFoundError{Kind: "workflow", ID: id}
		}
		type entry struct {
			base string
			it   attr.Item
		}
		items := []entry{{"workflow_exec", wf}}
		if req, ok := wf["workflow_request_id"].(attr.S); ok {
			r, err := st.get(ctx, tx, "workflow_request", string(req), name)
			if err != nil {
				return err
			}
			if r != nil {
				items = append(items, entry{"workflow_request", r})
			}
		}
		queries := map[string]string{
			"activity_exec":            fmt.Sprintf(`SELECT item FROM %s WHERE workflow_exec_id = ?`, st.name("activity_exec")),
			"activity_exec_dependency": fmt.Sprintf(`SELECT item FROM %s WHERE workflow_exec_id = ?`, st.name("activity_exec_dependency")),
			// The Simple Lambda API's events of each activity go with it.
			"activity_event": fmt.Sprintf(`SELECT item FROM %s WHERE activity_exec_id IN (SELECT activity_exec_id FROM %s WHERE workflow_exec_id = ?)`,
				st.name("activity_event"), st.name("activity_exec")),
		}
		for _, base := range []string{"activity_exec", "activity_exec_dependency", "activity_event"} {
			rows, err := tx.QueryContext(ctx, queries[base], id)
			if err != nil {
				return st.translate(err)
			}
			for rows.Next() {
				var raw string
				if err := rows.Scan(&raw); err != nil {
					rows.Close()
					return err
				}
				it, err := decodeJSON(st.prefix+base, nil, raw)
				if err != nil {
					rows.Close()
					return err
				}
				items = append(items, entry{base, it})
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		for _, x := range items {
			upd.Apply(x.it)
			if err := st.put(ctx, tx, x.base, x.it); err != nil {
				return err
			}
		}
		return nil
	})
}

// purge deletes the items whose expires_at has passed, as DynamoDB's TTL
// would.
func (st *Store) purge(ctx context.Context, now time.Time) (int64, error) {
	var n int64
	for _, t := range tables {
		// A row another client wrote that is not JSON is left alone (and
		// reported by the reads that meet it), never an error of the purge.
		res, err := st.db.ExecContext(ctx, fmt.Sprintf(`DELETE FROM %s WHERE CASE WHEN json_valid(item) THEN CAST(json_extract(item, '$.%s.N') AS REAL) < ? ELSE 0 END`,
			st.name(t.base), attr.ExpiresAt), float64(now.Unix()))
		if err != nil {
			return n, fmt.Errorf("purge expired items of %s: %w", t.base, err)
		}
		k, _ := res.RowsAffected()
		n += k
	}
	return n, nil
}

// --- dependencies

// Dependencies implements state.Store.
func (st *Store) Dependencies(ctx context.Context, workflowExecID string) ([]state.Dependency, error) {
	out, err := st.dependencyItems(ctx, "workflow_exec_id", workflowExecID)
	if _, other := state.Skipped(err); other != nil {
		return nil, fmt.Errorf("list dependencies of %s: %w", workflowExecID, err)
	}
	return out, err
}

// Dependents implements state.Store.
func (st *Store) Dependents(ctx context.Context, activityExecID string) ([]state.Dependency, error) {
	out, err := st.dependencyItems(ctx, "dependent_activity_exec_id", activityExecID)
	if _, other := state.Skipped(err); other != nil {
		return nil, fmt.Errorf("list dependents of %s: %w", activityExecID, err)
	}
	return out, err
}

// dependencyItems reads the dependency items whose column equals value,
// ordered by ID.
func (st *Store) dependencyItems(ctx context.Context, column, value string) ([]state.Dependency, error) {
	skips := st.undecoded.NewSkips()
	its, err := st.items(ctx, "activity_exec_dependency", skips, fmt.Sprintf(`WHERE "%s" = ? ORDER BY activity_exec_dependency`, column), value)
	if err != nil {
		return nil, err
	}
	out := make([]state.Dependency, 0, len(its))
	for _, r := range its {
		d, err := attr.DecodeDependency(st.prefix+"activity_exec_dependency", r.it)
		if err != nil {
			_ = skips.Add(r.decoded(err))
			continue
		}
		out = append(out, d)
	}
	return out, skips.Err()
}
