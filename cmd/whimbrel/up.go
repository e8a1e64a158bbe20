package main

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/web"
)

// UpCmd is `whimbrel up`.
type UpCmd struct {
	cli.StoreFlags
	TLSFlags
	Wrapper      string `name:"wrapper" type:"path" help:"The whimbrel-run binary (default: beside this binary, else on PATH). --supervise process needs it; inline needs it only for an activity that asks for WHIMBREL_API=simple, which fails without it."`
	Supervise    string `name:"supervise" env:"WHIMBREL_SUPERVISE" enum:"inline,process" default:"inline" help:"How the activities are supervised. inline (the default): in this process, which starts only each command (less CPU per activity, a quicker hop); they live and die with whimbrel up, whose Ctrl-C stops them anyway. process: a whimbrel-run process each. The flag wins over WHIMBREL_SUPERVISE. See docs/launcher.md."`
	LogDir       string `name:"log-dir" type:"path" help:"Where each activity's output goes, a folder per execution (default: logs/ beside the embedded store, .whimbrel/logs)."`
	MaxRunning   int    `name:"max-running" default:"${default_max_running}" help:"Run at most this many activities at once (0: no cap)."`
	WebAddr      string `name:"web-addr" default:"127.0.0.1:8080" help:"Where the web view listens (port 0: any free port). Loopback by default; any other address needs a token given explicitly."`
	TokenFile    string `name:"token-file" type:"path" help:"File whose first line is the web view's token (else WHIMBREL_WEB_TOKEN, else a random one, printed once in the address to open)."`
	AllowActions bool   `name:"allow-actions" help:"Allow cancelling and rerunning executions from the web view (read-only without it)."`
}

// Run checks the command line, then serves the embedded store until
// Ctrl-C (see package local/up).
func (c *UpCmd) Run(g *Globals, k *kong.Context) error {
	if c.MaxRunning < 0 {
		return &cli.UsageError{Msg: fmt.Sprintf("--max-running %d is negative: give 0 (no cap) or the most activities to run at once", c.MaxRunning)}
	}
	token, given, err := web.Token(c.TokenFile, os.Getenv("WHIMBREL_WEB_TOKEN"))
	if err != nil {
		return &cli.UsageError{Msg: "--token-file: " + err.Error()}
	}
	if err := web.CheckAddr(c.WebAddr, given); err != nil {
		return &cli.UsageError{Msg: "--web-addr: " + err.Error()}
	}
	if err := c.listen(c.WebAddr).Check(); err != nil {
		return &cli.UsageError{Msg: err.Error()}
	}
	if len(token) < web.MinTokenLength {
		return &cli.UsageError{Msg: web.ErrShortToken.Error()}
	}
	choice := c.Choose(defaultRunStore)
	if !choice.Embedded() {
		return &cli.UsageError{Msg: fmt.Sprintf("whimbrel up serves an embedded store (sqlite:PATH), not %s: on DynamoDB run whimbrel-launcher and whimbrel-monitor (and whimbrel web) instead", choice.Store)}
	}
	return serveUp(g, k, c, choice, token, given)
}

// detachHint says in one line what runs an execution started on the
// embedded store with --detach: whimbrel up, when one serves the store,
// else nothing until one does.
func detachHint(id string, c cli.Choice) string {
	path := strings.TrimPrefix(c.Store, "sqlite:")
	if info, ok := upRunning(path); ok {
		msg := fmt.Sprintf("workflow %s started: whimbrel up (pid %d) runs it", id, info.PID)
		if info.Web != "" {
			msg += "; its page: " + info.Web + "workflows/" + url.PathEscape(id)
		}
		return msg
	}
	run := "`whimbrel up --store " + c.Store + "`"
	if dir := filepath.Dir(path); filepath.ToSlash(filepath.Join(filepath.Base(dir), filepath.Base(path))) == cli.StateFile {
		run = "`whimbrel up` in " + filepath.Dir(dir)
	}
	return fmt.Sprintf("workflow %s waits: nothing runs it until whimbrel up serves %s (run %s: it launches the activities, fires the schedules and serves the web view until Ctrl-C), or run it here with `whimbrel start` without --detach",
		id, path, run)
}
