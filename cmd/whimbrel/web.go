package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/metrics"
	"github.com/whimbrel/whimbrel/web"
)

// WebCmd is `whimbrel web`.
type WebCmd struct {
	cli.StoreFlags
	TLSFlags
	Addr         string `name:"addr" default:"127.0.0.1:8080" help:"Address to listen on. Loopback by default; any other address needs a token given explicitly."`
	TokenFile    string `name:"token-file" type:"path" help:"File whose first line is the token every request must present (else WHIMBREL_WEB_TOKEN, else a random one, printed in the address to open)."`
	AllowActions bool   `name:"allow-actions" help:"Allow cancelling and rerunning executions from the pages and the API (read-only without it)."`
}

// Run serves the web view until SIGINT or SIGTERM.
func (c *WebCmd) Run(g *Globals, k *kong.Context) error {
	token, given, err := web.Token(c.TokenFile, os.Getenv("WHIMBREL_WEB_TOKEN"))
	if err != nil {
		return &cli.UsageError{Msg: "--token-file: " + err.Error()}
	}
	lo := c.listen(c.Addr)
	if err := errors.Join(web.CheckAddr(c.Addr, given), lo.Check()); err != nil {
		return &cli.UsageError{Msg: err.Error()}
	}
	if len(token) < web.MinTokenLength {
		// Said before the store is opened: a mistake in the command line
		// comes first.
		return &cli.UsageError{Msg: web.ErrShortToken.Error()}
	}
	a := reads
	if c.AllowActions {
		a = writes
	}
	m := metrics.New() // served at /metrics, behind the token
	c.Hooks = m.StoreHooks()
	se, err := open(g, k, c.StoreFlags, a)
	if err != nil {
		return err
	}
	defer se.close()
	log := g.Logger("whimbrel", k.Stderr)
	if weak := web.WeakToken(token); given && weak != "" {
		log.Warn(weak)
	}
	srv, err := web.New(web.Options{Store: se.st, Token: token, AllowActions: c.AllowActions, Logger: log,
		Metrics: m.Handler()})
	if err != nil {
		return &cli.UsageError{Msg: err.Error()}
	}
	ln, err := web.Listen(lo, log)
	if err != nil {
		srv.Close()
		return err
	}
	mode := "read-only"
	if c.AllowActions {
		mode = "actions allowed"
	}
	if given {
		// A chosen token is not printed: it may be shared, and logs are not.
		fmt.Fprintf(k.Stdout, "whimbrel web (%s): open %s://%s/?token=YOUR_TOKEN\n", mode, lo.Scheme(), ln.Addr())
	} else {
		fmt.Fprintf(k.Stdout, "whimbrel web (%s): open %s\n", mode, web.SchemeURL(lo.Scheme(), ln.Addr(), "/", token))
	}
	return srv.Serve(se.ctx, ln)
}
