package main

// A reverse proxy to DynamoDB Local that asks every data call for its
// consumed capacity and sums what the responses report, so that the write
// and read units of any build's binaries can be counted from outside:
// the store's Capacity hook (measureUnits) counts only this tree's code.

import (
	"bytes"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"strings"
	"sync"
	"time"
)

// capacityOps are the operations that take ReturnConsumedCapacity, and
// whether each writes. DynamoDB Local refuses the parameter elsewhere.
var capacityOps = map[string]bool{
	"PutItem": true, "UpdateItem": true, "DeleteItem": true, "BatchWriteItem": true, "TransactWriteItems": true,
	"GetItem": false, "BatchGetItem": false, "TransactGetItems": false, "Query": false, "Scan": false,
}

// capProxy forwards to DynamoDB Local and sums the units its answers
// report. A call that fails (a refused conditional write) reports none and
// is not counted, though DynamoDB charges it.
type capProxy struct {
	url         string
	srv         *http.Server
	mu          sync.Mutex
	write, read float64
}

func newCapProxy(endpoint string) (*capProxy, error) {
	rp, ln, err := proxyTo(endpoint)
	if err != nil {
		return nil, err
	}
	p := &capProxy{url: "http://" + ln.Addr().String()}
	// A process stopped in the middle of a call (a launcher's long poll
	// at SIGTERM) cancels it; the proxy's line for each would only be
	// noise beside the figures, and the process itself sees any failure.
	rp.ErrorLog = log.New(io.Discard, "", 0)
	rp.ModifyResponse = func(resp *http.Response) error {
		op := opOf(resp.Request)
		writes, counted := capacityOps[op]
		if !counted || resp.StatusCode != http.StatusOK {
			return nil
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		p.add(writes, consumedUnits(body))
		return nil
	}
	p.srv = &http.Server{ReadHeaderTimeout: time.Minute, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, counted := capacityOps[opOf(r)]; counted {
			if body, err := io.ReadAll(r.Body); err == nil {
				body = withCapacity(body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				r.ContentLength = int64(len(body))
			}
		}
		// An answer the proxy reads must come as it is, not compressed.
		r.Header.Set("Accept-Encoding", "identity")
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// opOf is the DynamoDB operation of a request, from its X-Amz-Target.
func opOf(r *http.Request) string {
	t := r.Header.Get("X-Amz-Target")
	return t[strings.LastIndex(t, ".")+1:]
}

// withCapacity sets ReturnConsumedCapacity to TOTAL in a request's JSON
// body; a body it cannot read goes on as it came.
func withCapacity(body []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return body
	}
	m["ReturnConsumedCapacity"] = json.RawMessage(`"TOTAL"`)
	out, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return out
}

// consumedUnits sums the CapacityUnits of a response's ConsumedCapacity,
// one object or a list of them (the batch and transaction calls).
func consumedUnits(body []byte) float64 {
	var resp struct{ ConsumedCapacity json.RawMessage }
	if json.Unmarshal(body, &resp) != nil || len(resp.ConsumedCapacity) == 0 {
		return 0
	}
	type cc struct{ CapacityUnits float64 }
	var list []cc
	if resp.ConsumedCapacity[0] != '[' {
		var one cc
		if json.Unmarshal(resp.ConsumedCapacity, &one) != nil {
			return 0
		}
		list = []cc{one}
	} else if json.Unmarshal(resp.ConsumedCapacity, &list) != nil {
		return 0
	}
	var u float64
	for _, c := range list {
		u += c.CapacityUnits
	}
	return u
}

func (p *capProxy) add(writes bool, units float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if writes {
		p.write += units
	} else {
		p.read += units
	}
}

// take returns the write and read units since the last take.
func (p *capProxy) take() (write, read float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	write, read = p.write, p.read
	p.write, p.read = 0, 0
	return write, read
}

func (p *capProxy) close() { _ = p.srv.Close() }
