package web

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Background is a read-only web view served beside another command's work
// (whimbrel run --web), on loopback, with a fresh token.
type Background struct {
	addr   net.Addr
	scheme string
	token  string
	cancel context.CancelFunc
	done   chan error
	shown  atomic.Bool // an address was announced: pages may be open
}

// StartBackground serves a read-only view of st as o says, on a loopback
// address (port 0: any free port), until Stop.
func StartBackground(st Store, o ListenOptions, log hclog.Logger) (*Background, error) {
	if err := CheckAddr(o.Addr, false); err != nil {
		return nil, err
	}
	token, err := NewToken()
	if err != nil {
		return nil, err
	}
	srv, err := New(Options{Store: st, Token: token, Logger: log})
	if err != nil {
		return nil, err
	}
	ln, err := Listen(o, log)
	if err != nil {
		srv.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Background{addr: ln.Addr(), scheme: o.Scheme(), token: token, cancel: cancel, done: make(chan error, 1)}
	go func() { b.done <- srv.Serve(ctx, ln) }()
	return b, nil
}

// URL is the address to open for path, with the token.
func (b *Background) URL(path string) string { return SchemeURL(b.scheme, b.addr, path, b.token) }

// Stop serves on for linger if an address was announced, so that open
// pages fetch what changed last, then shuts the view down and waits for it.
func (b *Background) Stop(linger time.Duration) error {
	if b.shown.Load() {
		time.Sleep(linger)
	}
	b.cancel()
	return <-b.done
}

// Announce returns what prints the address of an execution's page on w,
// once the execution has started.
func (b *Background) Announce(w io.Writer) func(workflowExecID string) {
	return func(id string) {
		b.shown.Store(true)
		fmt.Fprintf(w, "web view: %s\n", b.URL("/workflows/"+url.PathEscape(id)))
	}
}
