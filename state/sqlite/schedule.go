package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/internal/attr"
)

// Schedules: state.Schedules on SQLite, with the same items and conditions
// as on DynamoDB.

var _ state.Schedules = (*Store)(nil)

// scheduleTable is the schedule table, kept beside what reads and writes
// it; tables lists it with the others. Its due index is (due_shard,
// next_fire_epoch): only schedules with a next fire time have a shard.
var scheduleTable = table{base: "schedule", keys: []string{"schedule_name", "entry"},
	derived: []string{"due_shard", "next_fire_epoch"}, indexes: [][]string{{"due_shard", "next_fire_epoch"}}}

// PutSchedule implements state.Schedules, in one transaction.
func (st *Store) PutSchedule(ctx context.Context, s *state.Schedule, prev int, token string) error {
	if s.Name == "" {
		return errors.New("put schedule: it needs a name")
	}
	next := *s
	next.Version = prev + 1
	err := st.tx(ctx, func(tx *sql.Tx) error {
		cur, err := st.get(ctx, tx, "schedule", s.Name, attr.EntrySchedule)
		if err != nil {
			return err
		}
		if have := versionOf(cur); have != prev || (cur == nil) != (prev == 0) {
			return scheduleConflict(s.Name, prev, cur)
		}
		if token != "" {
			t, err := st.get(ctx, tx, "schedule", s.Name, attr.TokenEntry(token))
			if err != nil {
				return err
			}
			if t != nil {
				return &state.ExistsError{What: fmt.Sprintf("token of %s for schedule %s", token, s.Name)}
			}
			if err := st.put(ctx, tx, "schedule", attr.EncodeToken(s.Name, token, state.Truncate(time.Now()))); err != nil {
				return err
			}
		}
		return st.put(ctx, tx, "schedule", attr.EncodeSchedule(&next))
	})
	var ce *state.ConflictError
	var ee *state.ExistsError
	switch {
	case errors.As(err, &ce), errors.As(err, &ee):
		return err
	case err != nil:
		return fmt.Errorf("put schedule %s: %w", s.Name, err)
	}
	s.Version = next.Version
	return nil
}

func versionOf(it attr.Item) int {
	if it == nil {
		return 0
	}
	s, err := attr.DecodeSchedule("", it)
	if err != nil {
		return -1
	}
	return s.Version
}

// scheduleConflict says what the schedule held instead of version prev.
func scheduleConflict(name string, prev int, old attr.Item) error {
	want := fmt.Sprintf("version %d", prev)
	if prev == 0 {
		want = "no schedule yet"
	}
	got := "absent"
	if old != nil {
		got = fmt.Sprintf("at version %d", versionOf(old))
	}
	return &state.ConflictError{Kind: "schedule", ID: name, Want: want, State: got}
}

// GetSchedule implements state.Schedules.
func (st *Store) GetSchedule(ctx context.Context, name string) (*state.Schedule, error) {
	it, err := st.get(ctx, st.db, "schedule", name, attr.EntrySchedule)
	if err != nil {
		return nil, fmt.Errorf("get schedule %s: %w", name, err)
	}
	if it == nil {
		return nil, &state.NotFoundError{Kind: "schedule", ID: name}
	}
	return attr.DecodeSchedule(st.prefix+"schedule", it)
}

// DeleteSchedule implements state.Schedules: the schedule and its token
// items, in one transaction.
func (st *Store) DeleteSchedule(ctx context.Context, name string, prev int) error {
	err := st.tx(ctx, func(tx *sql.Tx) error {
		cur, err := st.get(ctx, tx, "schedule", name, attr.EntrySchedule)
		if err != nil {
			return err
		}
		if cur == nil {
			return &state.NotFoundError{Kind: "schedule", ID: name}
		}
		if versionOf(cur) != prev {
			return scheduleConflict(name, prev, cur)
		}
		_, err = tx.ExecContext(ctx, fmt.Sprintf(`DELETE FROM %s WHERE schedule_name = ? AND (entry = ? OR substr(entry, 1, ?) = ?)`, st.name("schedule")),
			name, attr.EntrySchedule, len(attr.TokenPrefix), attr.TokenPrefix)
		return err
	})
	var ce *state.ConflictError
	if err != nil && !errors.As(err, &ce) && !errors.Is(err, state.ErrNotFound) {
		return fmt.Errorf("delete schedule %s: %w", name, err)
	}
	return err
}

// Schedules implements state.Schedules. A schedule that cannot be decoded
// is left out and named in a *state.SkippedError.
func (st *Store) Schedules(ctx context.Context) ([]*state.Schedule, error) {
	skips := st.undecoded.NewSkips()
	its, err := st.items(ctx, "schedule", skips, `WHERE entry = ? ORDER BY schedule_name`, attr.EntrySchedule)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	var out []*state.Schedule
	for _, r := range its {
		s, err := attr.DecodeSchedule(st.prefix+"schedule", r.it)
		if err != nil {
			_ = skips.Add(r.decoded(err))
			continue
		}
		out = append(out, s)
	}
	return out, skips.Err()
}

// DueSchedules implements state.Schedules, through the due index.
func (st *Store) DueSchedules(ctx context.Context, now time.Time) ([]string, error) {
	var out []string
	for i := 0; i < state.ScheduleShards; i++ {
		rows, err := st.db.QueryContext(ctx, fmt.Sprintf(`SELECT schedule_name FROM %s WHERE due_shard = ? AND next_fire_epoch <= ? ORDER BY schedule_name`,
			st.name("schedule")), attr.ShardName(i), float64(now.UnixMilli())/1000)
		if err != nil {
			return nil, fmt.Errorf("list due schedules: %w", err)
		}
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				rows.Close()
				return nil, fmt.Errorf("list due schedules: %w", err)
			}
			out = append(out, name)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("list due schedules: %w", err)
		}
	}
	return out, nil
}
