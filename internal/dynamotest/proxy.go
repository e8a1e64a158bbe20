package dynamotest

import (
	"net"
	"net/url"
	"sync"
	"testing"
	"time"
)

// Proxy forwards TCP connections to the emulator until Cut, which closes
// every connection and refuses new ones: a participant behind it loses the
// store as in a network partition.
type Proxy struct {
	// Endpoint is the proxy's URL, to use in place of the emulator's.
	Endpoint string

	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	cut    bool
	delay  time.Duration
	stop   chan struct{} // closed by Cut: a held chunk is dropped
	wg     sync.WaitGroup
}

// SetDelay holds every chunk sent towards the emulator for d: a slow
// network, or with a long d one that accepts and never answers. Cut drops
// what is held.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// NewProxy starts a proxy to the emulator; it is closed when the test ends.
func NewProxy(t testing.TB) *Proxy {
	t.Helper()
	u, err := url.Parse(Endpoint(t))
	if err != nil {
		t.Fatalf("parse emulator endpoint: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &Proxy{Endpoint: "http://" + ln.Addr().String(), ln: ln, target: u.Host, conns: map[net.Conn]struct{}{}, stop: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Cut)
	return p
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed by Cut
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, up) {
			return
		}
		p.wg.Add(2)
		go p.pipe(c, up, false)
		go p.pipe(up, c, true)
	}
}

func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) pipe(dst, src net.Conn, delayed bool) {
	defer p.wg.Done()
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			d := p.delay
			p.mu.Unlock()
			if delayed && d > 0 {
				select {
				case <-time.After(d):
				case <-p.stop:
					return
				}
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Cut closes the listener and every connection, and waits for the proxy's
// goroutines. It is idempotent.
func (p *Proxy) Cut() {
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		return
	}
	p.cut = true
	close(p.stop)
	p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
