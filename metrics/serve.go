package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/monitor"
	"github.com/whimbrel/whimbrel/schedule"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// Flag is the --metrics-addr flag of a command's grammar.
type Flag struct {
	MetricsAddr string `name:"metrics-addr" env:"WHIMBREL_METRICS_ADDR" placeholder:"HOST:PORT" help:"Serve Prometheus metrics at http://HOST:PORT/metrics (off by default; no token: keep it on loopback or a private network). See docs/metrics.md."`
}

// shutdownGrace is how long a scrape in flight may finish on Stop.
const shutdownGrace = 5 * time.Second

// Server serves one process's metrics and owns the goroutines that feed
// them. A nil *Server is valid: it serves nothing, and its observers are
// nil.
type Server struct {
	m       *Metrics
	addr    string
	srv     *http.Server
	log     hclog.Logger
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	served  chan error
	stopped sync.Once
}

// Start listens on the flag's address and serves /metrics there, and
// points hooks at the metrics of the store's calls. With no address it
// does nothing and returns a nil *Server. The caller stops it with Stop.
func (f Flag) Start(log hclog.Logger, hooks *dynamodb.Hooks) (*Server, error) {
	if f.MetricsAddr == "" {
		return nil, nil
	}
	if _, _, err := net.SplitHostPort(f.MetricsAddr); err != nil {
		return nil, &AddrError{Addr: f.MetricsAddr, Err: err}
	}
	ln, err := net.Listen("tcp", f.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("listen for metrics on %s: %w", f.MetricsAddr, err)
	}
	m := New()
	if hooks != nil {
		*hooks = m.StoreHooks()
	}
	return serve(m, ln, log), nil
}

// AddrError is a --metrics-addr that is not HOST:PORT: a usage error.
type AddrError struct {
	Addr string
	Err  error
}

func (e *AddrError) Error() string {
	return fmt.Sprintf("--metrics-addr %q is not HOST:PORT (such as 127.0.0.1:9464): %v", e.Addr, e.Err)
}
func (e *AddrError) Unwrap() error { return e.Err }

func serve(m *Metrics, ln net.Listener, log hclog.Logger) *Server {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	log = log.Named("metrics")
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{m: m, addr: ln.Addr().String(), log: log, ctx: ctx, cancel: cancel, served: make(chan error, 1),
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
			ErrorLog: log.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})}}
	go func() { s.served <- s.srv.Serve(ln) }() // owned: Stop shuts it down and waits
	log.Info("serving metrics", "address", "http://"+ln.Addr().String()+"/metrics")
	return s
}

// Addr is the address the server listens on.
func (s *Server) Addr() string {
	if s == nil {
		return ""
	}
	return s.addr
}

// Metrics are the metrics served; nil on a nil s.
func (s *Server) Metrics() *Metrics {
	if s == nil {
		return nil
	}
	return s.m
}

// Monitor is the observer of a monitor's sweeps; nil on a nil s.
func (s *Server) Monitor() monitor.Observer { return s.Metrics().Monitor() }

// Ticked counts what a scheduler's tick started; a no-op on a nil s.
func (s *Server) Ticked(r schedule.Report) { s.Metrics().Ticked(r) }

// Stop stops what feeds the metrics, then the server, on a fresh context:
// the one that said stop is done already. A scrape in flight gets a few
// seconds to finish.
func (s *Server) Stop() error {
	if s == nil {
		return nil
	}
	var err error
	s.stopped.Do(func() {
		s.cancel()
		s.wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		err = s.srv.Shutdown(ctx)
		if serr := <-s.served; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		if err != nil {
			err = fmt.Errorf("stop serving metrics: %w", err)
		}
	})
	return err
}

// ExitCode makes a command exit with 2, the status of a usage error.
func (e *AddrError) ExitCode() int { return 2 }
