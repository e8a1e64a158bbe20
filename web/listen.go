package web

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// DefaultMaxConns is how many connections the web view holds open at once
// (ListenOptions.MaxConns): far more than people and scripts watching
// runs need, few enough that file descriptors and goroutines stay bounded
// however many connections a client opens. Past it, new connections wait
// in the kernel's backlog until one closes; a slow one is closed after the
// read timeout.
const DefaultMaxConns = 512

// ListenOptions say where and how the web view listens. Every command that
// serves it (whimbrel web, whimbrel run --web, …) takes them from its flags.
type ListenOptions struct {
	Addr string
	// CertFile and KeyFile, both or neither, serve HTTPS with that
	// certificate (PEM; the chain first) and its key.
	CertFile, KeyFile string
	// MaxConns caps the connections open at once (default
	// DefaultMaxConns).
	MaxConns int
}

// TLS reports whether the options serve HTTPS.
func (o ListenOptions) TLS() bool { return o.CertFile != "" }

// Scheme is "https" with TLS, else "http".
func (o ListenOptions) Scheme() string {
	if o.TLS() {
		return "https"
	}
	return "http"
}

// Check refuses a certificate without its key, or the reverse.
func (o ListenOptions) Check() error {
	if (o.CertFile == "") != (o.KeyFile == "") {
		return errors.New("--tls-cert and --tls-key go together: give both (a PEM certificate and its key), or neither")
	}
	return nil
}

// Listen opens the web view's listener: at most MaxConns connections at
// once, TLS when a certificate is given. Beyond loopback without TLS it
// warns: the token and every page then cross the network in clear.
func Listen(o ListenOptions, log hclog.Logger) (net.Listener, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	var cfg *tls.Config
	if o.TLS() {
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("load the TLS certificate %s and key %s: %w", o.CertFile, o.KeyFile, err)
		}
		cfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", o.Addr, err)
	}
	if host, _, err := net.SplitHostPort(o.Addr); err == nil && !Loopback(host) && cfg == nil && log != nil {
		log.Warn("the web view listens beyond loopback without TLS: the token and the pages cross the network in clear; give --tls-cert and --tls-key, or serve it behind a TLS proxy", "addr", ln.Addr().String())
	}
	n := o.MaxConns
	if n <= 0 {
		n = DefaultMaxConns
	}
	ln = &limitListener{Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{})}
	if cfg != nil {
		ln = tls.NewListener(ln, cfg)
	}
	return ln, nil
}

// limitListener accepts a connection only while fewer than cap(slots)
// are open; the slot is freed when the connection is closed.
type limitListener struct {
	net.Listener
	slots     chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
