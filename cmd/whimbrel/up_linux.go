//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	locallauncher "github.com/whimbrel/whimbrel/launcher/local"
	"github.com/whimbrel/whimbrel/local"
	"github.com/whimbrel/whimbrel/local/up"
	"github.com/whimbrel/whimbrel/web"
)

// serveUp takes the store's lock, opens it and serves it until Ctrl-C.
func serveUp(g *Globals, k *kong.Context, c *UpCmd, choice cli.Choice, token string, given bool) error {
	wrapper, err := locallauncher.WrapperFor(c.Wrapper, c.Supervise)
	if err != nil {
		return &cli.UsageError{Msg: err.Error()}
	}
	logDir, err := here{HereFlags: HereFlags{LogDir: c.LogDir}, choice: choice}.logDir()
	if err != nil {
		return err
	}
	path := strings.TrimPrefix(choice.Store, "sqlite:")
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		return fmt.Errorf("create the log folder %s: %w", logDir, err)
	}
	lock, err := up.Acquire(path, up.Info{PID: os.Getpid(), Started: time.Now().UTC()})
	if err != nil {
		return err
	}
	defer lock.Release()
	ctx := context.Background()
	log := g.Logger("whimbrel", k.Stderr)
	st, err := c.OpenChoice(ctx, log, choice)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.Install(ctx, false); err != nil {
		return fmt.Errorf("install the embedded store %s: %w", path, err)
	}
	lo := c.listen(c.WebAddr)
	ln, err := web.Listen(lo, log)
	if err != nil {
		return fmt.Errorf("%w (choose another --web-addr; port 0: any free port)", err)
	}
	address := web.SchemeURL(lo.Scheme(), ln.Addr(), "/", token)
	if given { // a chosen token is not printed: it may be shared, and logs are not
		address = fmt.Sprintf("%s://%s/?token=YOUR_TOKEN", lo.Scheme(), ln.Addr())
	}
	_ = lock.Update(up.Info{PID: os.Getpid(), Started: time.Now().UTC(), Web: fmt.Sprintf("%s://%s/", lo.Scheme(), ln.Addr())})
	mode := "read-only"
	if c.AllowActions {
		mode = "actions allowed"
	}
	fmt.Fprintf(k.Stdout, "whimbrel up: serving %s until Ctrl-C\n  activities: run here; their output in %s/EXECUTION/ACTIVITY.log\n  schedules:  fired here; requests (whimbrel request) started here\n  web view:   %s (%s)\n",
		path, logDir, address, mode)
	interrupt, stop := local.Interrupts()
	defer stop()
	ust, ok := st.(up.Store)
	if !ok { // every store Whimbrel opens keeps schedules
		return fmt.Errorf("the store %s keeps no schedules", choice.Store)
	}
	rq, _ := st.(up.Requests) // the embedded store's Simple Lambda API, as cli.SQLite keeps it
	return up.Serve(ctx, ust, up.Options{Requests: rq, Wrapper: wrapper, Supervise: c.Supervise, StoreEnv: map[string]string{"WHIMBREL_STORE": choice.Store, "WHIMBREL_TABLE_PREFIX": c.Prefix},
		LogDir: logDir, MaxRunning: c.MaxRunning, Web: ln, WebToken: token, AllowActions: c.AllowActions,
		Interrupt: interrupt, Notes: k.Stderr, Logger: log})
}

// upRunning reports whether whimbrel up serves the embedded store at
// path, and its web view's address.
func upRunning(path string) (up.Info, bool) { return up.Running(path) }
