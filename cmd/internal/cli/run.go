package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/alecthomas/kong"
	"github.com/whimbrel/whimbrel/internal/inert"
	"github.com/whimbrel/whimbrel/state"
)

// Program names a binary and the exit codes of its own failures.
type Program struct {
	Name        string
	Description string
	UsageExit   int // for a wrong command line (default ExitUsage)
	FailureExit int // for a command that failed (default ExitFailure)
	// StoreExit is for a store that could not be used (state.ErrUnavailable):
	// default ExitStore, or FailureExit when that is set.
	StoreExit int
	// Vars adds to Vars the binary's own values for its flag tags, such
	// as its components' defaults (see FlagDuration).
	Vars kong.Vars
}

// ExitError makes a command exit with Code. With an empty Msg nothing is
// printed: the command has said what there was to say.
type ExitError struct {
	Code int
	Msg  string
}

func (e *ExitError) Error() string { return e.Msg }

// ExitCode returns the status to exit with.
func (e *ExitError) ExitCode() int { return e.Code }

// Run parses args into the grammar cli, runs the selected command and
// returns the exit code. Errors are printed on stderr as "NAME: error: …".
// Bindings are passed to the commands' Run methods.
func Run(prog Program, cli any, args []string, stdout, stderr io.Writer, bindings ...any) int {
	if prog.UsageExit == 0 {
		prog.UsageExit = ExitUsage
	}
	if prog.StoreExit == 0 {
		prog.StoreExit = prog.FailureExit
	}
	if prog.FailureExit == 0 {
		prog.FailureExit = ExitFailure
	}
	if prog.StoreExit == 0 {
		prog.StoreExit = ExitStore
	}
	name := prog.Name
	exit := -1
	parser, err := kong.New(cli,
		kong.Name(name),
		kong.Description(prog.Description),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { exit = code }),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
		Vars().CloneWith(prog.Vars),
		kong.Bind(bindings...),
	)
	if err != nil {
		fmt.Fprintf(stderr, "%s: error: %v\n", name, err)
		return prog.FailureExit
	}
	kctx, err := parser.Parse(args)
	if exit >= 0 { // --help or --version
		return exit
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: error: %s\n", name, explain(parser.Model, err))
		fmt.Fprintln(stderr, usageHint(name, err))
		return prog.UsageExit
	}
	kctx.Stdout, kctx.Stderr = stdout, stderr
	if err := kctx.Run(bindings...); err != nil {
		var ce interface{ ExitCode() int }
		var ue *UsageError
		if msg := strings.TrimSpace(err.Error()); msg != "" {
			// Errors quote ids and output from the store: keep their
			// lines, but nothing a terminal would act on.
			fmt.Fprintf(stderr, "%s: error: %s\n", name, strings.Join(inert.Lines(msg), "\n"))
		}
		switch {
		case errors.As(err, &ue):
			return prog.UsageExit
		case errors.As(err, &ce):
			return ce.ExitCode()
		case errors.Is(err, state.ErrUnavailable):
			return prog.StoreExit
		}
		return prog.FailureExit
	}
	return ExitOK
}

// Main runs a binary's CLI with the process's arguments and streams.
func Main(prog Program, cli any, bindings ...any) {
	stop := startProfile()
	code := Run(prog, cli, os.Args[1:], os.Stdout, os.Stderr, bindings...)
	stop()
	os.Exit(code)
}
