// Package web is Whimbrel's web view (whimbrel web): server-rendered pages
// of the workflow executions in a store — a listing, and each execution's
// DAG drawn as a graph with a table of its activities and their attempts —
// and of its schedules with their run logs, that update themselves while
// they are open, and a JSON API with the same data as whimbrel status
// --json, whimbrel list --json and whimbrel schedule list/show --json.
//
// It is a wing: it reads through inspect and acts through workflow, as the
// CLI does, and adds nothing to the core. Every request needs the token
// (a bearer header, or the cookie a ?token= link sets); actions (cancel,
// rerun) are refused unless the server allows them, and need a CSRF token.
package web

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Defaults of Options.
const (
	// DefaultAddr is where whimbrel web listens: loopback only.
	DefaultAddr = "127.0.0.1:8080"
	// DefaultStoreTimeout bounds each read of the store made for a request;
	// past it the page says the store is slow instead of hanging.
	DefaultStoreTimeout = 5 * time.Second
	// DefaultRefresh is how long a read is shared by every open page (and
	// every API client) asking for the same thing: many viewers cost the
	// store no more than one read per DefaultRefresh.
	DefaultRefresh = 500 * time.Millisecond
	// PollInterval is how often an open page asks for changes; with
	// DefaultRefresh a change shows within 2 s (plus the read) at worst,
	// and one open page still costs one read per PollInterval.
	PollInterval = 1500 * time.Millisecond
	// MinTokenLength is the shortest token New accepts.
	MinTokenLength = 16
	// DefaultReadTimeout bounds reading a whole request, body included:
	// the view's requests are small (a form at most), so a client that
	// sends one slowly is cut off instead of holding its connection.
	DefaultReadTimeout = 15 * time.Second
	// DefaultWriteTimeout bounds a request's whole answer. Every answer is
	// one page, fragment or JSON document built from store reads bounded
	// by StoreTimeout; the pages poll (PollInterval) rather than keep a
	// response open, so nothing legitimate streams for longer.
	DefaultWriteTimeout = time.Minute
	// shutdownGrace is how long requests in flight may finish on shutdown.
	shutdownGrace = 5 * time.Second
)

// Options configure a Server.
type Options struct {
	// Store is where the executions are read (and, with AllowActions,
	// changed).
	Store Store
	// Token is the secret every request must present. Required.
	Token string
	// AllowActions lets a client cancel and rerun executions; without it
	// the server is read-only.
	AllowActions bool
	// StoreTimeout bounds each store read (default DefaultStoreTimeout).
	StoreTimeout time.Duration
	// Refresh is how long a read is reused (default DefaultRefresh).
	Refresh time.Duration
	// ReadTimeout and WriteTimeout bound each request's reading and
	// answer (default DefaultReadTimeout, DefaultWriteTimeout).
	ReadTimeout, WriteTimeout time.Duration
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger hclog.Logger
	// Metrics, when set, is served at /metrics, behind the token.
	Metrics http.Handler
}

// Server serves the web view. Make one with New; it is an http.Handler.
type Server struct {
	opts    Options
	log     hclog.Logger
	keys    keys
	reads   *cache
	fails   *failures
	handler http.Handler

	stop     context.CancelFunc
	stopOnce sync.Once
}

var _ http.Handler = (*Server)(nil)

// ErrShortToken is returned by New for a token under MinTokenLength.
var ErrShortToken = fmt.Errorf("the web token must be at least %d characters", MinTokenLength)

// New makes a Server. Close it when done: it stops the store reads still
// under way.
func New(opts Options) (*Server, error) {
	if opts.Store == nil {
		return nil, errors.New("web: no store")
	}
	if len(opts.Token) < MinTokenLength {
		return nil, ErrShortToken
	}
	if opts.StoreTimeout <= 0 {
		opts.StoreTimeout = DefaultStoreTimeout
	}
	if opts.Refresh <= 0 {
		opts.Refresh = DefaultRefresh
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = DefaultReadTimeout
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	base, stop := context.WithCancel(context.Background())
	s := &Server{
		opts:  opts,
		log:   opts.Logger.Named("web"),
		keys:  deriveKeys(opts.Token),
		reads: newCache(base, opts.Refresh, opts.StoreTimeout, opts.Now),
		fails: newFailures(time.Now),
		stop:  stop,
	}
	s.handler = s.routes()
	return s, nil
}

// ServeHTTP answers one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Close stops the store reads still under way and waits for them.
func (s *Server) Close() error {
	s.stopOnce.Do(func() {
		s.stop()
		s.reads.wait()
	})
	return nil
}

// Serve answers on ln (see Listen) until ctx is done, then shuts down:
// requests in flight get a few seconds to finish. It closes the Server.
// Every connection is bounded: its headers, its whole request and its
// answer each have a deadline, and an idle one is closed.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	defer s.Close()
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: min(10*time.Second, s.opts.ReadTimeout),
		ReadTimeout:       s.opts.ReadTimeout,
		WriteTimeout:      s.opts.WriteTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          s.log.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve the web view: %w", err)
	case <-ctx.Done():
	}
	// A fresh context: the one that said stop is done already.
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) && serr != nil {
		return fmt.Errorf("serve the web view: %w", serr)
	}
	if err != nil {
		return fmt.Errorf("shut the web view down: %w", err)
	}
	return nil
}
