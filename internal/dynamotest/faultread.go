package dynamotest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"github.com/google/uuid"
)

// read answers a Query or a Scan: on an index, from the lagging view when
// the faults lag the indexes; in pages of at most PageSize items.
func (p *FaultProxy) read(ctx context.Context, h http.Header, op string, req map[string]any, faulty bool, f Faults) (*response, error) {
	if faulty && f.PageSize > 0 {
		if n, ok := req["Limit"].(float64); !ok || int(n) > f.PageSize {
			req["Limit"] = float64(f.PageSize)
		}
	}
	if faulty && str(req["IndexName"]) != "" && f.lag(str(req["IndexName"])) > 0 {
		info, err := p.info(ctx, str(req["TableName"]))
		if err == nil && info != nil {
			q, err := parseIndexQuery(op, req, info)
			if err == nil {
				out, stale, err := p.model.answer(q)
				if err == nil {
					p.stats.indexReads.Add(1)
					if stale {
						p.stats.staleReads.Add(1)
					}
					if out["LastEvaluatedKey"] != nil {
						p.stats.paged.Add(1)
					}
					if rc := str(req["ReturnConsumedCapacity"]); rc != "" && rc != "NONE" {
						out["ConsumedCapacity"] = map[string]any{"TableName": q.table, "CapacityUnits": 0.5}
					}
					h := http.Header{}
					h.Set("X-Amzn-Requestid", uuid.NewString())
					return &response{status: 200, header: h, body: marshalReq(out)}, nil
				}
			}
		}
		p.stats.unlagged.Add(1)
	}
	resp, err := p.forward(ctx, h, marshalReq(req))
	if err == nil && faulty && f.PageSize > 0 && resp.status == 200 && bytes.Contains(resp.body, []byte(`"LastEvaluatedKey"`)) {
		p.stats.paged.Add(1)
	}
	return resp, err
}

// batchGet forwards the first half of each table's keys and returns the
// rest as unprocessed.
func (p *FaultProxy) batchGet(ctx context.Context, h http.Header, req map[string]any) (*response, error) {
	items := asMap(req["RequestItems"])
	unprocessed := map[string]any{}
	cut := false
	for table, v := range items {
		ka := asMap(v)
		keys, _ := ka["Keys"].([]any)
		if len(keys) < 2 {
			continue
		}
		keep := (len(keys) + 1) / 2
		rest := map[string]any{}
		for k, x := range ka {
			rest[k] = x
		}
		rest["Keys"] = keys[keep:]
		ka["Keys"] = keys[:keep]
		unprocessed[table] = rest
		cut = true
	}
	resp, err := p.forward(ctx, h, marshalReq(req))
	if err != nil || resp.status != 200 || !cut {
		return resp, err
	}
	p.stats.partial.Add(1)
	var out map[string]any
	if err := json.Unmarshal(resp.body, &out); err != nil {
		return resp, nil
	}
	for table, v := range asMap(out["UnprocessedKeys"]) {
		if mine := asMap(unprocessed[table]); mine != nil {
			theirs, _ := asMap(v)["Keys"].([]any)
			ks, _ := mine["Keys"].([]any)
			mine["Keys"] = append(ks, theirs...)
		} else {
			unprocessed[table] = v
		}
	}
	out["UnprocessedKeys"] = unprocessed
	return withBody(resp, out), nil
}
