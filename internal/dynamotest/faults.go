package dynamotest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/uuid"
)

// FaultProxy is an HTTP proxy for the DynamoDB API that does to the calls
// it forwards what DynamoDB may do and DynamoDB Local never does: queries
// on an index answer from a view that lags behind the table, calls are
// throttled or fail with a 500 (some after the write was applied), a
// transaction is cancelled for a conflict, a batch is left partly
// unprocessed, and results come in small pages. Each fault is switched on
// by Faults, per test and at any time.
//
// Every write must reach DynamoDB through the proxy, on one of its two
// endpoints: the lagging view of the indexes is built from the writes it
// forwards. Endpoint injects the faults (participants use it);
// CleanEndpoint injects none and answers index queries from the table as
// it stands (a test's own setup and checks use it).
type FaultProxy struct {
	// Endpoint is the URL of the faulty side.
	Endpoint string
	// CleanEndpoint is the URL of the side without faults.
	CleanEndpoint string

	target   string
	client   *http.Client
	auth     string
	mu       sync.Mutex
	faults   Faults
	rnd      *rand.Rand
	infos    map[string]*tableInfo
	infoMu   sync.Mutex
	model    *model
	locks    [512]chan struct{} // one slot each: a lock a waiter can give up
	stats    faultCounters
	servers  []*http.Server
	closeOne sync.Once
}

// Faults says what the proxy's faulty side does; the zero value forwards
// every call as it is.
type Faults struct {
	// IndexLag: a Query or Scan on a global secondary index answers from
	// a view in which each write becomes visible after a random delay
	// between half IndexLag and IndexLag (in order, item by item), so
	// that a test can count on a write not being visible at once.
	IndexLag time.Duration
	// IndexLags sets the lag of the indexes it names (by index name, on
	// every table), in place of IndexLag.
	IndexLags map[string]time.Duration
	// Throttle is the share of data calls answered, without forwarding,
	// ThrottlingException or ProvisionedThroughputExceededException (in
	// turn).
	Throttle float64
	// Errors is the share of data calls answered HTTP 500
	// (InternalServerError); of those on writes, the share AfterWrite is
	// answered so after the write was forwarded and applied: a request
	// that timed out after it succeeded.
	Errors     float64
	AfterWrite float64
	// Conflicts is the share of TransactWriteItems calls cancelled,
	// without forwarding, with TransactionCanceledException and the
	// reason TransactionConflict.
	Conflicts float64
	// PartialBatches leaves the second half of every BatchGetItem and
	// BatchWriteItem of more than one request unprocessed
	// (UnprocessedKeys, UnprocessedItems).
	PartialBatches bool
	// PageSize, when positive, cuts every Query and Scan to pages of at
	// most this many items (its Limit), with LastEvaluatedKey.
	PageSize int
}

// FaultStats counts what the proxy did.
type FaultStats struct {
	Calls, Throttled, Errors, ErrorsAfterWrite, Conflicts, PartialBatches, Paged int64
	// IndexReads counts queries and scans answered from the lagging view;
	// StaleReads those whose answer differed from the table as it stood;
	// Unlagged those forwarded instead because the proxy could not
	// evaluate them.
	IndexReads, StaleReads, Unlagged int64
}

type faultCounters struct {
	calls, throttled, errors, errorsAfterWrite, conflicts, partial, paged, indexReads, staleReads, unlagged atomic.Int64
}

// NewFaultProxy starts a proxy to the emulator (target: its endpoint; ""
// for the one `make test` started) injecting f; it stops when the test
// ends.
func NewFaultProxy(t testing.TB, target string, f Faults) *FaultProxy {
	t.Helper()
	if target == "" {
		target = Endpoint(t)
	}
	u, err := url.Parse(target)
	if err != nil {
		t.Fatalf("parse emulator endpoint: %v", err)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("fault proxy seed %d", seed)
	p := &FaultProxy{
		target: u.Scheme + "://" + u.Host,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}},
		auth:   "AWS4-HMAC-SHA256 Credential=" + AccessKey + "/20260101/" + Region + "/dynamodb/aws4_request, SignedHeaders=host, Signature=00",
		faults: f, rnd: rand.New(rand.NewPCG(seed, 7)), infos: map[string]*tableInfo{}, model: newModel(seed),
	}
	for i := range p.locks {
		p.locks[i] = make(chan struct{}, 1)
	}
	for _, faulty := range []bool{true, false} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("fault proxy listen: %v", err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { p.serve(w, r, faulty) }),
			ReadHeaderTimeout: time.Minute}
		p.servers = append(p.servers, srv)
		go func() { _ = srv.Serve(ln) }()
		if faulty {
			p.Endpoint = "http://" + ln.Addr().String()
		} else {
			p.CleanEndpoint = "http://" + ln.Addr().String()
		}
	}
	t.Cleanup(p.Close)
	return p
}

// Close stops the proxy.
func (p *FaultProxy) Close() {
	p.closeOne.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, s := range p.servers {
			_ = s.Shutdown(ctx)
		}
	})
}

// Client returns an SDK client through the faulty side, or with clean
// through the clean side. It checks the responses' CRC32 checksums, which
// the proxy computes for every answer.
func (p *FaultProxy) Client(clean bool) *awsdynamodb.Client {
	ep := p.Endpoint
	if clean {
		ep = p.CleanEndpoint
	}
	return awsdynamodb.New(awsdynamodb.Options{
		Region:       Region,
		BaseEndpoint: aws.String(ep),
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
	})
}

// Env is the environment of a participant that reaches the emulator
// through the faulty side, with the given table prefix (see Env).
func (p *FaultProxy) Env(t testing.TB, prefix string) []string {
	t.Helper()
	env := Env(t, prefix)
	for i, v := range env {
		if strings.HasPrefix(v, "AWS_ENDPOINT_URL_DYNAMODB=") {
			env[i] = "AWS_ENDPOINT_URL_DYNAMODB=" + p.Endpoint
		}
	}
	return env
}

// SetFaults changes what the faulty side does from now on.
func (p *FaultProxy) SetFaults(f Faults) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = f
}

// Stats returns what the proxy has done so far.
func (p *FaultProxy) Stats() FaultStats {
	c := &p.stats
	return FaultStats{Calls: c.calls.Load(), Throttled: c.throttled.Load(), Errors: c.errors.Load(),
		ErrorsAfterWrite: c.errorsAfterWrite.Load(), Conflicts: c.conflicts.Load(), PartialBatches: c.partial.Load(),
		Paged: c.paged.Load(), IndexReads: c.indexReads.Load(), StaleReads: c.staleReads.Load(), Unlagged: c.unlagged.Load()}
}

func (s FaultStats) String() string {
	return fmt.Sprintf("%d calls: %d throttled, %d answered 500 (%d after the write applied), %d transactions cancelled, %d batches left partly unprocessed, %d pages cut short, %d index reads from the lagging view (%d stale, %d forwarded unlagged)",
		s.Calls, s.Throttled, s.Errors, s.ErrorsAfterWrite, s.Conflicts, s.PartialBatches, s.Paged, s.IndexReads, s.StaleReads, s.Unlagged)
}

// lag is the lag of the named index.
func (f Faults) lag(index string) time.Duration {
	if l, ok := f.IndexLags[index]; ok {
		return l
	}
	return f.IndexLag
}

// roll draws a number in [0, 1) and returns the faults in force.
func (p *FaultProxy) roll() (float64, float64, Faults) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rnd.Float64(), p.rnd.Float64(), p.faults
}

var writeOps = map[string]bool{"PutItem": true, "UpdateItem": true, "DeleteItem": true, "TransactWriteItems": true, "BatchWriteItem": true}

var dataOps = map[string]bool{"GetItem": true, "Query": true, "Scan": true, "BatchGetItem": true, "TransactGetItems": true,
	"PutItem": true, "UpdateItem": true, "DeleteItem": true, "TransactWriteItems": true, "BatchWriteItem": true}

// response is an answer to send back.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (p *FaultProxy) serve(w http.ResponseWriter, r *http.Request, faulty bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	target := r.Header.Get("X-Amz-Target")
	op := target[strings.LastIndex(target, ".")+1:]
	p.stats.calls.Add(1)
	var f Faults
	afterWrite := false
	if faulty && dataOps[op] {
		var roll, coin float64
		roll, coin, f = p.roll()
		switch {
		case roll < f.Throttle:
			p.stats.throttled.Add(1)
			kind := "com.amazon.coral.availability#ThrottlingException"
			if coin < 0.5 {
				kind = "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException"
			}
			p.reply(w, errorResponse(400, kind, "Rate of requests exceeds the allowed throughput (fault proxy)"))
			return
		case roll < f.Throttle+f.Errors:
			p.stats.errors.Add(1)
			if !writeOps[op] || coin >= f.AfterWrite {
				p.reply(w, errorResponse(500, "com.amazonaws.dynamodb.v20120810#InternalServerError", "Internal server error (fault proxy)"))
				return
			}
			afterWrite = true
			p.stats.errorsAfterWrite.Add(1)
		case op == "TransactWriteItems" && coin < f.Conflicts:
			p.stats.conflicts.Add(1)
			p.reply(w, transactionConflict(body))
			return
		}
	}
	var req map[string]any
	if len(body) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			req = nil // forwarded as it is: the emulator says what is wrong
		}
	}
	ctx := r.Context()
	if writeOps[op] {
		// A write is seen through to its end, so that what was applied
		// is recorded, whether or not the caller still waits.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
	}
	var resp *response
	switch {
	case req == nil:
		resp, err = p.forward(ctx, r.Header, body)
	case op == "Query" || op == "Scan":
		resp, err = p.read(ctx, r.Header, op, req, faulty, f)
	case op == "BatchGetItem" && faulty && f.PartialBatches:
		resp, err = p.batchGet(ctx, r.Header, req)
	case writeOps[op]:
		resp, err = p.write(r.Context(), ctx, r.Header, op, req, faulty && f.PartialBatches)
	default:
		if op == "CreateTable" || op == "DeleteTable" || op == "UpdateTable" {
			p.forgetTable(str(req["TableName"]))
		}
		resp, err = p.forward(ctx, r.Header, body)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if afterWrite && resp.status == 200 {
		resp = errorResponse(500, "com.amazonaws.dynamodb.v20120810#InternalServerError", "Internal server error after the write was applied (fault proxy)")
	}
	p.reply(w, resp)
}

// reply writes a response with its CRC32 checksum computed anew, as
// DynamoDB sends it (the SDK checks it when asked to).
func (p *FaultProxy) reply(w http.ResponseWriter, r *response) {
	for k, vs := range r.header {
		switch http.CanonicalHeaderKey(k) {
		case "Content-Length", "X-Amz-Crc32", "Content-Encoding", "Transfer-Encoding":
			continue
		}
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	}
	w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(r.body)), 10))
	w.Header().Set("Content-Length", strconv.Itoa(len(r.body)))
	w.WriteHeader(r.status)
	_, _ = w.Write(r.body)
}

func errorResponse(status int, kind, msg string) *response {
	b, _ := json.Marshal(map[string]string{"__type": kind, "message": msg})
	h := http.Header{}
	h.Set("X-Amzn-Requestid", uuid.NewString())
	return &response{status: status, header: h, body: b}
}

// transactionConflict cancels a transaction: its first item conflicts
// with another transaction, the others had no problem.
func transactionConflict(body []byte) *response {
	var req struct{ TransactItems []json.RawMessage }
	_ = json.Unmarshal(body, &req)
	reasons := []map[string]string{}
	codes := []string{}
	for i := range max(len(req.TransactItems), 1) {
		if i == 0 {
			reasons = append(reasons, map[string]string{"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"})
			codes = append(codes, "TransactionConflict")
		} else {
			reasons = append(reasons, map[string]string{"Code": "None"})
			codes = append(codes, "None")
		}
	}
	b, _ := json.Marshal(map[string]any{
		"__type":              "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
		"Message":             "Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]",
		"CancellationReasons": reasons,
	})
	h := http.Header{}
	h.Set("X-Amzn-Requestid", uuid.NewString())
	return &response{status: 400, header: h, body: b}
}

// forward sends a call on to the emulator as it is.
func (p *FaultProxy) forward(ctx context.Context, h http.Header, body []byte) (*response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.target+"/", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, vs := range h {
		switch http.CanonicalHeaderKey(k) {
		case "Content-Length", "Accept-Encoding", "Connection":
			continue
		}
		req.Header[k] = vs
	}
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// call makes a call of the proxy's own on the emulator.
func (p *FaultProxy) call(ctx context.Context, op string, in any) (map[string]any, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set("X-Amz-Target", "DynamoDB_20120810."+op)
	h.Set("Content-Type", "application/x-amz-json-1.0")
	h.Set("Authorization", p.auth)
	resp, err := p.forward(ctx, h, body)
	if err != nil {
		return nil, err
	}
	if resp.status != 200 {
		return nil, fmt.Errorf("%s: %d %s", op, resp.status, resp.body)
	}
	var out map[string]any
	return out, json.Unmarshal(resp.body, &out)
}

func marshalReq(v map[string]any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func withBody(r *response, v map[string]any) *response {
	return &response{status: r.status, header: r.header, body: marshalReq(v)}
}

// forgetTable drops what the proxy knows of a table whose definition
// changes.
func (p *FaultProxy) forgetTable(table string) {
	p.infoMu.Lock()
	delete(p.infos, table)
	p.infoMu.Unlock()
	p.model.forget(table)
}

// info describes a table, reading it (and, the first time, every item it
// already holds) from the emulator; nil when it does not exist.
func (p *FaultProxy) info(ctx context.Context, table string) (*tableInfo, error) {
	p.infoMu.Lock()
	defer p.infoMu.Unlock()
	if info, ok := p.infos[table]; ok {
		return info, nil
	}
	out, err := p.call(ctx, "DescribeTable", map[string]any{"TableName": table})
	if err != nil {
		if strings.Contains(err.Error(), "ResourceNotFoundException") {
			return nil, nil
		}
		return nil, err
	}
	desc := asMap(out["Table"])
	if str(desc["TableStatus"]) != "ACTIVE" {
		return nil, nil // not yet: described again at the next call
	}
	info := &tableInfo{indexes: map[string]indexInfo{}}
	info.hash, info.rng = keysOf(desc["KeySchema"])
	for _, g := range asList(desc["GlobalSecondaryIndexes"]) {
		gm := asMap(g)
		ix := indexInfo{}
		ix.hash, ix.rng = keysOf(gm["KeySchema"])
		pr := asMap(gm["Projection"])
		ix.projection = str(pr["ProjectionType"])
		for _, a := range asList(pr["NonKeyAttributes"]) {
			ix.include = append(ix.include, str(a))
		}
		info.indexes[str(gm["IndexName"])] = ix
	}
	// What the table holds already is visible at once.
	var start any
	for {
		in := map[string]any{"TableName": table, "ConsistentRead": true}
		if start != nil {
			in["ExclusiveStartKey"] = start
		}
		page, err := p.call(ctx, "Scan", in)
		if err != nil {
			return nil, err
		}
		for _, it := range asList(page["Items"]) {
			p.model.record(table, info, asMap(it), asMap(it), func(string) time.Duration { return 0 })
		}
		if start = page["LastEvaluatedKey"]; start == nil {
			break
		}
	}
	p.infos[table] = info
	return info, nil
}

func keysOf(schema any) (hash, rng string) {
	for _, k := range asList(schema) {
		km := asMap(k)
		if str(km["KeyType"]) == "HASH" {
			hash = str(km["AttributeName"])
		} else {
			rng = str(km["AttributeName"])
		}
	}
	return hash, rng
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// lockKeys takes the locks of the given items, in one order, so that the
// proxy records each item's writes in the order they were applied. A
// caller that gives up while it waits (its request timed out) gets
// ctx's error and no lock: its write is never forwarded, so abandoned
// resends do not queue up behind each other on a slow store.
func (p *FaultProxy) lockKeys(ctx context.Context, keys []string) (func(), error) {
	idx := map[int]bool{}
	for _, k := range keys {
		idx[int(crc32.ChecksumIEEE([]byte(k))%uint32(len(p.locks)))] = true
	}
	order := make([]int, 0, len(idx))
	for i := range idx {
		order = append(order, i)
	}
	sort.Ints(order)
	unlock := func(n int) {
		for _, i := range order[:n] {
			<-p.locks[i]
		}
	}
	for n, i := range order {
		select {
		case p.locks[i] <- struct{}{}:
		case <-ctx.Done():
			unlock(n)
			return nil, ctx.Err()
		}
	}
	return func() { unlock(len(order)) }, nil
}
