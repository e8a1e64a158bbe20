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
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
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
	scheduleTable,     // schedule.go
	poolTable,         // pool.go
	notificationTable, // notification.go
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
		if t.base == state.TableActivityExec {
			stmts = append(stmts, parkIndex(st.prefix, st.name(t.base)), waitIndex(st.prefix, st.name(t.base)))
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
