package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/inspect"
	"github.com/whimbrel/whimbrel/state"
)

// items is `whimbrel status --items`: a page of the elements of the
// execution's for_each maps.
func (c *StatusCmd) items(se *session, k *kong.Context) error {
	st := state.ActivityState(strings.ToUpper(c.State))
	if c.State != "" && !st.Valid() {
		return &cli.UsageError{Msg: fmt.Sprintf("--state %q is not an activity state: use one of %s", c.State, state.ActivityStates)}
	}
	if c.Page < 1 || c.PageSize < 1 {
		return &cli.UsageError{Msg: "--page and --page-size count from 1"}
	}
	pages, err := inspect.LoadItems(se.ctx, se.st, c.ID, inspect.ItemQuery{Activity: c.Activity, State: st, Page: c.Page, PageSize: c.PageSize}, time.Now())
	if errors.Is(err, state.ErrNotFound) {
		return fmt.Errorf("no workflow execution %s in %s: check the ID (whimbrel list shows the recent ones)", c.ID, se.where(c.Prefix))
	}
	if err != nil {
		return err
	}
	if c.JSON {
		return writeJSON(k.Stdout, pages)
	}
	if len(pages) == 0 {
		fmt.Fprintln(k.Stdout, "the workflow has no for_each activity")
		return nil
	}
	inspect.WriteItems(k.Stdout, pages, inspect.ColorsFor(k.Stdout))
	return nil
}
