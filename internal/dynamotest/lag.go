package dynamotest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"
)

// The lagging view of the indexes. The proxy sees every write its
// participants make (all of them must reach DynamoDB through it) and
// records each item's versions in the order they were applied, each with
// the moment it becomes visible in each index: when it was applied plus
// a random delay of up to that index's lag, never before the version it
// replaces (each index is updated on its own, as on DynamoDB).
// A query on an index is then answered from the versions visible now: an
// item appears late, leaves late and carries stale projected attributes,
// as on DynamoDB, where an index is updated asynchronously.

// tableInfo is what the proxy knows of a table's keys and indexes.
type tableInfo struct {
	hash, rng string
	indexes   map[string]indexInfo
}

type indexInfo struct {
	hash, rng  string
	projection string // KEYS_ONLY, INCLUDE or ALL
	include    []string
}

// version is one state of an item (nil when deleted), and when it
// becomes visible in each index.
type version struct {
	visible map[string]time.Time
	item    record
}

// itemHistory is an item's versions, oldest first.
type itemHistory struct {
	versions []version
}

// tableModel holds every item of one table the proxy has seen.
type tableModel struct {
	info  *tableInfo
	items map[string]*itemHistory
	// byHash lists, per index and hash key value, the items that carry
	// or carried it in a version still kept: a query's candidates.
	byHash map[string]map[string]map[string]bool
}

type model struct {
	mu     sync.Mutex
	tables map[string]*tableModel
	rnd    *rand.Rand
}

func newModel(seed uint64) *model {
	return &model{tables: map[string]*tableModel{}, rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// keyString is an item's key, canonical.
func keyString(info *tableInfo, it record) string {
	b, _ := json.Marshal([]any{it[info.hash], it[info.rng]})
	return string(b)
}

func hashString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// record adds a version of an item applied now (item nil: deleted), with
// a delay in each index between half its lag and its lag.
func (m *model) record(table string, info *tableInfo, key record, item record, lag func(index string) time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	tm := m.tables[table]
	if tm == nil {
		tm = &tableModel{info: info, items: map[string]*itemHistory{}, byHash: map[string]map[string]map[string]bool{}}
		m.tables[table] = tm
	}
	k := keyString(info, key)
	h := tm.items[k]
	if h == nil {
		h = &itemHistory{}
		tm.items[k] = h
	}
	now := time.Now()
	v := version{visible: map[string]time.Time{}, item: item}
	for name := range info.indexes {
		at := now
		if l := lag(name); l > 0 {
			at = now.Add(l/2 + time.Duration(m.rnd.Int64N(int64(l/2)+1)))
		}
		if n := len(h.versions); n > 0 && h.versions[n-1].visible[name].After(at) {
			at = h.versions[n-1].visible[name] // an index applies an item's changes in order
		}
		v.visible[name] = at
	}
	h.versions = append(h.versions, v)
	// Keep, for every index, the version it shows now and those to come.
	keep := len(h.versions) - 1
	for name := range info.indexes {
		shown := 0
		for i, v := range h.versions {
			if !v.visible[name].After(now) {
				shown = i
			}
		}
		keep = min(keep, shown)
	}
	h.versions = h.versions[keep:]
	if item != nil {
		for name, ix := range info.indexes {
			hv, ok := item[ix.hash]
			if !ok {
				continue
			}
			byValue := tm.byHash[name]
			if byValue == nil {
				byValue = map[string]map[string]bool{}
				tm.byHash[name] = byValue
			}
			hs := hashString(hv)
			if byValue[hs] == nil {
				byValue[hs] = map[string]bool{}
			}
			byValue[hs][k] = true
		}
	}
}

// forget drops a table's items (it was deleted or created anew).
func (m *model) forget(table string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.tables, table)
}

// view is an item as an index sees it at now, and whether that differs
// from the item as it stands.
func (h *itemHistory) view(index string, now time.Time) (record, bool) {
	var seen record
	idx := -1
	for i, v := range h.versions {
		if !v.visible[index].After(now) {
			seen, idx = v.item, i
		}
	}
	return seen, idx != len(h.versions)-1
}

// indexQuery is a Query or Scan on an index, parsed.
type indexQuery struct {
	table, index string
	hashValue    any // nil: a scan
	keyCond      cond
	filter       cond
	forward      bool
	limit        int
	start        record
	projection   []string // ProjectionExpression's names, if any
	count        bool
}

var errUnlagged = errors.New("not answered from the lagging view")

// answer evaluates q on the lagging view. stale reports whether any
// candidate's view differed from the item as it stands.
func (m *model) answer(q *indexQuery) (out map[string]any, stale bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	tm := m.tables[q.table]
	if tm == nil {
		return map[string]any{"Items": []any{}, "Count": 0, "ScannedCount": 0}, false, nil
	}
	ix, ok := tm.info.indexes[q.index]
	if !ok {
		return nil, false, errUnlagged
	}
	var keys []string
	if q.hashValue != nil {
		for k := range tm.byHash[q.index][hashString(q.hashValue)] {
			keys = append(keys, k)
		}
	} else {
		for k := range tm.items {
			keys = append(keys, k)
		}
	}
	now := time.Now()
	type hit struct {
		item record
		sort []any
	}
	var hits []hit
	for _, k := range keys {
		h := tm.items[k]
		if h == nil {
			continue
		}
		it, differs := h.view(q.index, now)
		if q.hashValue != nil && !h.mayCarry(ix.hash, q.hashValue) {
			delete(tm.byHash[q.index][hashString(q.hashValue)], k) // no kept version has it
		}
		if it == nil {
			stale = stale || differs
			continue
		}
		if _, ok := it[ix.hash]; !ok {
			continue // a sparse index holds only items with its keys
		}
		if _, ok := it[ix.rng]; ix.rng != "" && !ok {
			continue
		}
		if q.hashValue != nil {
			if c, ok := compareValues(it[ix.hash], q.hashValue); !ok || c != 0 {
				stale = stale || differs
				continue
			}
		}
		if q.keyCond != nil && !q.keyCond.eval(it) {
			stale = stale || differs
			continue
		}
		stale = stale || differs
		hits = append(hits, hit{it, []any{it[ix.rng], it[tm.info.hash], it[tm.info.rng]}})
	}
	less := func(a, b []any) bool {
		for i := range a {
			if a[i] == nil || b[i] == nil {
				continue
			}
			c, _ := compareValues(a[i], b[i])
			if c != 0 {
				return c < 0
			}
		}
		return false
	}
	sort.Slice(hits, func(i, j int) bool {
		if q.forward {
			return less(hits[i].sort, hits[j].sort)
		}
		return less(hits[j].sort, hits[i].sort)
	})
	if q.start != nil {
		s := []any{q.start[ix.rng], q.start[tm.info.hash], q.start[tm.info.rng]}
		i := sort.Search(len(hits), func(i int) bool {
			if q.forward {
				return less(s, hits[i].sort)
			}
			return less(hits[i].sort, s)
		})
		hits = hits[i:]
	}
	items := []any{}
	scanned := 0
	var last record
	for i, h := range hits {
		if q.limit > 0 && scanned == q.limit {
			break
		}
		scanned++
		if i < len(hits)-1 && q.limit > 0 && scanned == q.limit {
			last = h.item
		}
		if q.filter != nil && !q.filter.eval(h.item) {
			continue
		}
		items = append(items, project(h.item, tm.info, ix, q.projection))
	}
	out = map[string]any{"Count": len(items), "ScannedCount": scanned}
	if !q.count {
		out["Items"] = items
	}
	if last != nil {
		lek := record{}
		for _, a := range []string{tm.info.hash, tm.info.rng, ix.hash, ix.rng} {
			if v, ok := last[a]; ok && a != "" {
				lek[a] = v
			}
		}
		out["LastEvaluatedKey"] = lek
	}
	return out, stale, nil
}

// mayCarry reports whether a kept version of the item has the value v
// under attribute a.
func (h *itemHistory) mayCarry(a string, v any) bool {
	for _, ver := range h.versions {
		if ver.item == nil {
			continue
		}
		if c, ok := compareValues(ver.item[a], v); ok && c == 0 {
			return true
		}
	}
	return false
}

// project keeps what the index projects, and of that what the query asked.
func project(it record, info *tableInfo, ix indexInfo, only []string) record {
	out := record{}
	keep := map[string]bool{info.hash: true, info.rng: true, ix.hash: true, ix.rng: true}
	for _, a := range ix.include {
		keep[a] = true
	}
	for a, v := range it {
		if ix.projection == "ALL" || keep[a] {
			out[a] = v
		}
	}
	if len(only) > 0 {
		sel := record{}
		for _, a := range only {
			if v, ok := out[a]; ok {
				sel[a] = v
			}
		}
		out = sel
	}
	return out
}

// parseIndexQuery reads a Query or Scan request on an index.
func parseIndexQuery(op string, req map[string]any, info *tableInfo) (*indexQuery, error) {
	q := &indexQuery{table: str(req["TableName"]), index: str(req["IndexName"]), forward: true}
	ix, ok := info.indexes[q.index]
	if !ok {
		return nil, errUnlagged
	}
	names := map[string]string{}
	for k, v := range asMap(req["ExpressionAttributeNames"]) {
		names[k] = str(v)
	}
	values := asMap(req["ExpressionAttributeValues"])
	if req["KeyConditions"] != nil || req["QueryFilter"] != nil || req["ScanFilter"] != nil || req["AttributesToGet"] != nil ||
		req["Segment"] != nil {
		return nil, errUnlagged // the legacy parameters, or a parallel scan: not Whimbrel's
	}
	if op == "Query" {
		kc, err := parseExpr(str(req["KeyConditionExpression"]), names, values)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errUnlagged, err)
		}
		q.keyCond = kc
		q.hashValue = hashOf(kc, ix.hash)
		if q.hashValue == nil {
			return nil, fmt.Errorf("%w: no equality on %s", errUnlagged, ix.hash)
		}
		if b, ok := req["ScanIndexForward"].(bool); ok {
			q.forward = b
		}
	}
	if f := str(req["FilterExpression"]); f != "" {
		c, err := parseExpr(f, names, values)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errUnlagged, err)
		}
		q.filter = c
	}
	if p := str(req["ProjectionExpression"]); p != "" {
		for _, a := range strings.Split(p, ",") {
			a = strings.TrimSpace(a)
			if strings.HasPrefix(a, "#") {
				a = names[a]
			}
			if a == "" || strings.ContainsAny(a, ".[") {
				return nil, errUnlagged
			}
			q.projection = append(q.projection, a)
		}
	}
	if n, ok := req["Limit"].(float64); ok {
		q.limit = int(n)
	}
	q.start = asMap(req["ExclusiveStartKey"])
	q.count = str(req["Select"]) == "COUNT"
	return q, nil
}

// hashOf finds the value a key condition sets the hash key equal to: a
// key condition is "hash = :v", alone or ANDed with one on the range key.
func hashOf(kc cond, hash string) any {
	switch c := kc.(type) {
	case andCond:
		for _, part := range c {
			if v := hashOf(part, hash); v != nil {
				return v
			}
		}
	case eqCond:
		if c.name == hash {
			return c.value
		}
	}
	return nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}
