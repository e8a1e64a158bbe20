package web

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Failed authentications are counted per client address in a leaky
// bucket: failBurst of them at once, then one per failRefill. An address
// whose bucket is empty is answered 429 at once, its credentials not even
// compared, until the bucket has refilled a little: guessing a token from
// one address goes no faster than that, and no request is held waiting
// (a delay would hold a goroutine and a connection per guess). The
// address is the connection's: a header such as X-Forwarded-For is the
// client's to write, so a client behind the same proxy as another shares
// its bucket.
const (
	failBurst  = 10
	failRefill = 2 * time.Second
	// maxFailAddrs bounds the addresses remembered; past it the full
	// buckets are forgotten, and if none is, all are.
	maxFailAddrs = 10000
)

type failures struct {
	mu  sync.Mutex
	by  map[string]*bucket
	now func() time.Time
}

type bucket struct {
	level float64 // failures not yet leaked away
	at    time.Time
	told  bool // the address was logged as refused since it filled
}

func newFailures(now func() time.Time) *failures {
	return &failures{by: map[string]*bucket{}, now: now}
}

// leak empties b for the time passed since it was last looked at.
func (b *bucket) leak(now time.Time) {
	b.level -= float64(now.Sub(b.at)) / float64(failRefill)
	if b.level < 0 {
		b.level = 0
	}
	b.at = now
}

// refused reports whether addr is refused for now, with how long until it
// may try again, and whether this is the first refusal since it filled.
func (f *failures) refused(addr string) (bool, time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.by[addr]
	if b == nil {
		return false, 0, false
	}
	now := f.now()
	b.leak(now)
	if b.level+1 <= failBurst {
		b.told = false
		return false, 0, false
	}
	first := !b.told
	b.told = true
	wait := time.Duration((b.level + 1 - failBurst) * float64(failRefill))
	return true, wait, first
}

// failed counts one failure of addr.
func (f *failures) failed(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	b := f.by[addr]
	if b == nil {
		if len(f.by) >= maxFailAddrs {
			f.forget(now)
		}
		b = &bucket{at: now}
		f.by[addr] = b
	}
	b.leak(now)
	b.level++
}

// forget drops the buckets that have leaked empty, or every one if none
// has.
func (f *failures) forget(now time.Time) {
	for a, b := range f.by {
		if b.leak(now); b.level == 0 {
			delete(f.by, a)
		}
	}
	if len(f.by) >= maxFailAddrs {
		clear(f.by)
	}
}

// clientAddr is the address a request's connection came from, without
// its port.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// presents reports whether a request carries a credential: a bearer
// header, a ?token=, or the view's cookie. A request with none is not a
// guess, and is neither counted nor refused.
func presents(r *http.Request) bool {
	if r.Header.Get("Authorization") != "" || r.URL.Query().Has("token") {
		return true
	}
	_, err := r.Cookie(CookieName)
	return err == nil
}

// tooMany answers a request from an address that failed too often.
func (s *Server) tooMany(w http.ResponseWriter, r *http.Request, wait time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(int(wait/time.Second)+1))
	if wantsJSON(r) {
		writeJSONError(w, http.StatusTooManyRequests, "too many failed authentications from this address: wait, then try again with the right token")
		return
	}
	s.renderError(w, r, http.StatusTooManyRequests, "Too many failed attempts",
		"This address presented a wrong token too often. Wait a little, then open the address whimbrel web printed.")
}
