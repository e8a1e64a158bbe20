package dynamodb

import "net/http"

// idleConnsPerHost is how many idle connections to DynamoDB's endpoint the
// client keeps open. A launcher that supervises activities inline, and a
// monitor that queries the 32 shards of the state index at once, have
// tens of calls in flight together; the SDK's default keeps 10, so every
// call above that closes its connection when it ends, and the next one
// dials a new one (a TCP handshake, and the transport's two goroutines
// started and stopped, per call). Keeping as many as the transport's total
// of idle connections lets every call after the first burst reuse one.
const idleConnsPerHost = 100

// tuneTransport sets the connection pool of the SDK's HTTP transport for
// many concurrent calls to one endpoint. Signing, checksums and retries
// are the SDK's as configured: only the pooling of connections changes.
func tuneTransport(t *http.Transport) {
	t.MaxIdleConnsPerHost = idleConnsPerHost
	if t.MaxIdleConns < idleConnsPerHost {
		t.MaxIdleConns = idleConnsPerHost
	}
}
