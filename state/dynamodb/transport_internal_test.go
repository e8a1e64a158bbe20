package dynamodb

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestClientReusesConnectionsOfConcurrentCalls makes rounds of 30 calls
// at once through the client the store is built on: after the first
// round, no call dials a new connection, since the connections of a
// round are kept idle for the next.
func TestClientReusesConnectionsOfConcurrentCalls(t *testing.T) {
	const n = 30
	var dialed atomic.Int64
	var arrived sync.WaitGroup
	var release atomic.Pointer[chan struct{}]
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Done()
		select { // every call of the round is in flight at once
		case <-*release.Load():
		case <-time.After(20 * time.Second):
		}
		_, _ = w.Write([]byte("{}"))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialed.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	client := httpClient(30 * time.Second)
	for round := 1; round <= 3; round++ {
		arrived.Add(n)
		ch := make(chan struct{})
		release.Store(&ch)
		var done sync.WaitGroup
		errs := make(chan error, n)
		for range n {
			done.Add(1)
			go func() {
				defer done.Done()
				resp, err := client.Do(mustRequest(t, srv.URL))
				if err != nil {
					errs <- err
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}()
		}
		arrived.Wait()
		close(ch)
		done.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	if got := dialed.Load(); got != n {
		t.Fatalf("3 rounds of %d concurrent calls dialed %d connections, want %d (those of the first round, kept for the others)", n, got, n)
	}
}

func mustRequest(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
