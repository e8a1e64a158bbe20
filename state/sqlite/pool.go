package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/internal/attr"
)

// Pools: state.PoolStore on SQLite, with the same items and conditions as
// on DynamoDB.

var _ state.PoolStore = (*Store)(nil)

// poolTable is the pool table, kept beside what reads and writes it;
// tables lists it with the others.
var poolTable = table{base: state.TablePool, keys: []string{"pool_name", "entry"}}

// PoolItems implements state.PoolStore.
func (st *Store) PoolItems(ctx context.Context, name string) (*state.Pool, []*state.PoolShard, error) {
	// A malformed item fails the read: a shard left out would let in
	// more holders than the pool's size.
	skips := st.undecoded.NewSkips()
	its, err := st.items(ctx, state.TablePool, skips, `WHERE pool_name = ? ORDER BY entry`, name)
	if err == nil {
		err = skips.Err()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read pool %s: %w", name, err)
	}
	var p *state.Pool
	var shards []*state.PoolShard
	for _, r := range its {
		table := st.prefix + state.TablePool
		if e, _ := r.it["entry"].(attr.S); string(e) == attr.EntryPool {
			if p, err = attr.DecodePool(table, r.it); err != nil {
				return nil, nil, err
			}
			continue
		}
		s, err := attr.DecodePoolShard(table, r.it)
		if err != nil {
			return nil, nil, err
		}
		shards = append(shards, s)
	}
	return p, shards, nil
}

// PutPool implements state.PoolStore.
func (st *Store) PutPool(ctx context.Context, p *state.Pool, prev int) error {
	next := *p
	next.Version = prev + 1
	if err := st.putVersioned(ctx, p.Name, attr.EntryPool, prev, attr.EncodePool(&next)); err != nil {
		return err
	}
	p.Version = next.Version
	return nil
}

// PutPoolShard implements state.PoolStore.
func (st *Store) PutPoolShard(ctx context.Context, s *state.PoolShard, prev int) error {
	next := *s
	next.Version = prev + 1
	if err := st.putVersioned(ctx, s.Pool, attr.SlotsEntry(s.Index), prev, attr.EncodePoolShard(&next)); err != nil {
		return err
	}
	s.Version = next.Version
	return nil
}

// putVersioned writes a pool item if the stored one is at version prev
// (0: absent), in one transaction.
func (st *Store) putVersioned(ctx context.Context, name, entry string, prev int, it attr.Item) error {
	err := st.tx(ctx, func(tx *sql.Tx) error {
		cur, err := st.get(ctx, tx, state.TablePool, name, entry)
		if err != nil {
			return err
		}
		have := 0
		if cur != nil {
			have = -1
			if v, ok := cur["version"].(attr.N); ok {
				_, _ = fmt.Sscan(string(v), &have)
			}
		}
		if have != prev {
			return attr.PoolConflict(name, entry, prev, cur)
		}
		return st.put(ctx, tx, state.TablePool, it)
	})
	var ce *state.ConflictError
	if err != nil && !errors.As(err, &ce) {
		return fmt.Errorf("put pool %s %s: %w", name, entry, err)
	}
	return err
}

// DeletePool implements state.PoolStore.
func (st *Store) DeletePool(ctx context.Context, name string) error {
	err := st.tx(ctx, func(tx *sql.Tx) error {
		cur, err := st.get(ctx, tx, state.TablePool, name, attr.EntryPool)
		if err != nil {
			return err
		}
		if cur == nil {
			return &state.NotFoundError{Kind: "pool", ID: name}
		}
		_, err = tx.ExecContext(ctx, fmt.Sprintf(`DELETE FROM %s WHERE pool_name = ?`, st.name(state.TablePool)), name)
		return err
	})
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return fmt.Errorf("delete pool %s: %w", name, err)
	}
	return err
}

// ListPools implements state.PoolStore. A pool that cannot be decoded is
// left out and named in a *state.SkippedError.
func (st *Store) ListPools(ctx context.Context) ([]*state.Pool, error) {
	skips := st.undecoded.NewSkips()
	its, err := st.items(ctx, state.TablePool, skips, `WHERE entry = ? ORDER BY pool_name`, attr.EntryPool)
	if err != nil {
		return nil, fmt.Errorf("list pools: %w", err)
	}
	var out []*state.Pool
	for _, r := range its {
		p, err := attr.DecodePool(st.prefix+state.TablePool, r.it)
		if err != nil {
			_ = skips.Add(r.decoded(err))
			continue
		}
		out = append(out, p)
	}
	return out, skips.Err()
}
