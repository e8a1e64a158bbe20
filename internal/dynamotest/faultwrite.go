package dynamotest

import (
	"context"
	"encoding/json"
)

// touched is one item a write changes, and how the proxy learns its new
// version: the item put, a deletion, or (an update) a consistent read
// made while the item's lock is held.
type touched struct {
	table string
	info  *tableInfo
	key   record
	put   record
	del   bool
	read  bool
	check bool // a transaction's condition check: nothing changes
}

// write forwards a write, holding the locks of the items it changes, and
// records their new versions in the lagging view. partial leaves the
// second half of a BatchWriteItem's requests for each table unprocessed.
// waiting is the caller's request: the locks are waited for while it
// lasts; ctx bounds the write once forwarded.
func (p *FaultProxy) write(waiting, ctx context.Context, h map[string][]string, op string, req map[string]any, partial bool) (*response, error) {
	var ts []touched
	strip := false
	unprocessed := map[string]any{}
	switch op {
	case "PutItem":
		it := asMap(req["Item"])
		ts = append(ts, touched{table: str(req["TableName"]), key: it, put: it})
	case "DeleteItem":
		ts = append(ts, touched{table: str(req["TableName"]), key: asMap(req["Key"]), del: true})
	case "UpdateItem":
		ts = append(ts, touched{table: str(req["TableName"]), key: asMap(req["Key"]), read: true})
		switch str(req["ReturnValues"]) {
		case "", "NONE":
			// Ask for the new item, and strip it from the answer.
			req["ReturnValues"] = "ALL_NEW"
			strip = true
			ts[0].read = false
		case "ALL_NEW":
			ts[0].read = false
		}
	case "TransactWriteItems":
		for _, x := range asList(req["TransactItems"]) {
			xm := asMap(x)
			switch {
			case xm["Put"] != nil:
				put := asMap(xm["Put"])
				ts = append(ts, touched{table: str(put["TableName"]), key: asMap(put["Item"]), put: asMap(put["Item"])})
			case xm["Delete"] != nil:
				del := asMap(xm["Delete"])
				ts = append(ts, touched{table: str(del["TableName"]), key: asMap(del["Key"]), del: true})
			case xm["Update"] != nil:
				upd := asMap(xm["Update"])
				ts = append(ts, touched{table: str(upd["TableName"]), key: asMap(upd["Key"]), read: true})
			case xm["ConditionCheck"] != nil:
				cc := asMap(xm["ConditionCheck"])
				ts = append(ts, touched{table: str(cc["TableName"]), key: asMap(cc["Key"]), check: true})
			}
		}
	case "BatchWriteItem":
		for table, v := range asMap(req["RequestItems"]) {
			reqs := asList(v)
			if partial && len(reqs) > 1 {
				keep := (len(reqs) + 1) / 2
				unprocessed[table] = reqs[keep:]
				reqs = reqs[:keep]
				asMap(req["RequestItems"])[table] = reqs
			}
			for _, r := range reqs {
				rm := asMap(r)
				if pr := asMap(rm["PutRequest"]); pr != nil {
					ts = append(ts, touched{table: table, key: asMap(pr["Item"]), put: asMap(pr["Item"])})
				} else if dr := asMap(rm["DeleteRequest"]); dr != nil {
					ts = append(ts, touched{table: table, key: asMap(dr["Key"]), del: true})
				}
			}
		}
	}
	var keys []string
	for i := range ts {
		info, err := p.info(ctx, ts[i].table)
		if err != nil {
			return nil, err
		}
		ts[i].info = info
		if info != nil {
			keys = append(keys, ts[i].table+"\x00"+keyString(info, ts[i].key))
		}
	}
	unlock, err := p.lockKeys(waiting, keys)
	if err != nil {
		return nil, err
	}
	defer unlock()
	resp, err := p.forward(ctx, h, marshalReq(req))
	if err != nil || resp.status != 200 {
		return resp, err
	}
	var out map[string]any
	if err := json.Unmarshal(resp.body, &out); err != nil {
		return resp, nil
	}
	p.mu.Lock()
	lag := p.faults.lag
	p.mu.Unlock()
	leftOver := len(asMap(out["UnprocessedItems"])) > 0
	for _, t := range ts {
		if t.info == nil || t.check {
			continue
		}
		var it record
		switch {
		case t.put != nil && !leftOver:
			it = t.put
		case t.del && !leftOver:
			it = nil
		case op == "UpdateItem" && !t.read:
			it = asMap(out["Attributes"])
		default:
			got, err := p.call(ctx, "GetItem", map[string]any{"TableName": t.table, "Key": keyOnly(t.info, t.key), "ConsistentRead": true})
			if err != nil {
				continue // not recorded: the index view misses this version
			}
			it = asMap(got["Item"])
		}
		p.model.record(t.table, t.info, t.key, it, lag)
	}
	changed := false
	if strip {
		delete(out, "Attributes")
		changed = true
	}
	if len(unprocessed) > 0 {
		p.stats.partial.Add(1)
		merged := asMap(out["UnprocessedItems"])
		if merged == nil {
			merged = map[string]any{}
		}
		for table, rest := range unprocessed {
			merged[table] = append(asList(merged[table]), asList(rest)...)
		}
		out["UnprocessedItems"] = merged
		changed = true
	}
	if changed {
		return withBody(resp, out), nil
	}
	return resp, nil
}

// keyOnly is an item's key attributes.
func keyOnly(info *tableInfo, it record) record {
	k := record{info.hash: it[info.hash]}
	if info.rng != "" {
		k[info.rng] = it[info.rng]
	}
	return k
}
