package inspect

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/whimbrel/whimbrel/internal/inert"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// A for_each map is one row of a status, with its counts; its elements
// are listed on demand, a page at a time (docs/for-each.md).

// MapCounts are a map's elements by where they stand (see
// workflow.ElementCounts).
type MapCounts = workflow.ElementCounts

// mapCounts counts the elements of the map m among acts; nil when m is
// not a map.
func mapCounts(m *state.ActivityExec, acts []*state.ActivityExec) *MapCounts {
	return workflow.CountElements(m, acts)
}

// latestElements returns the latest attempt of each element of the named
// map, in index order.
func latestElements(acts []*state.ActivityExec, name string) []*state.ActivityExec {
	return workflow.LatestElements(acts, name)
}

// Item is what the list of a map's elements shows of one.
type Item struct {
	Name  string              `json:"name"` // as in convert[17]
	Index int                 `json:"item_index"`
	ID    string              `json:"activity_exec_id"`
	State state.ActivityState `json:"state"`
	// Shown is SKIPPED for an element whose when was false (its state is
	// COMPLETED).
	Shown      string     `json:"shown,omitempty"`
	Skipped    bool       `json:"skipped,omitempty"`
	Attempt    int        `json:"attempt"`
	Started    *time.Time `json:"start_time,omitempty"`
	Seconds    *float64   `json:"duration_seconds,omitempty"`
	ExitCode   *int       `json:"exit_code,omitempty"`
	Reason     string     `json:"reason,omitempty"`
	StderrTail string     `json:"stderr_tail,omitempty"`
}

// ItemPage is one page of a map's elements.
type ItemPage struct {
	Activity string `json:"activity"`
	Total    int    `json:"total"` // elements that match, on every page
	Page     int    `json:"page"`  // from 1
	PageSize int    `json:"page_size"`
	Items    []Item `json:"items"`
}

// ItemQuery selects a page of a map's elements.
type ItemQuery struct {
	Activity string              // the map; empty: every map of the workflow
	State    state.ActivityState // only those whose latest attempt is in it (empty: any)
	Page     int                 // from 1 (0: 1)
	PageSize int                 // 0: 50
}

// Items returns a page of the elements of each map of the execution
// (of the one the query names), by their latest attempts, in index order.
func Items(s *Status, acts []*state.ActivityExec, q ItemQuery, now time.Time) ([]ItemPage, error) {
	if q.Page <= 0 {
		q.Page = 1
	}
	if q.PageSize <= 0 {
		q.PageSize = 50
	}
	var out []ItemPage
	for _, a := range s.Activities {
		if a.Map == nil || (q.Activity != "" && a.Name != q.Activity) {
			continue
		}
		p := ItemPage{Activity: a.Name, Page: q.Page, PageSize: q.PageSize, Items: []Item{}}
		for _, e := range latestElements(acts, a.Name) {
			if q.State != "" && e.State != q.State {
				continue
			}
			p.Total++
			if p.Total <= (q.Page-1)*q.PageSize || p.Total > q.Page*q.PageSize {
				continue
			}
			end := e.EndTime
			if end.IsZero() && e.State == state.Running {
				end = now
			}
			p.Items = append(p.Items, Item{Name: state.ItemName(e.ActivityName, *e.ItemIndex), Index: *e.ItemIndex,
				ID: e.ActivityExecID, State: e.State, Attempt: e.Attempt, Started: timePtr(e.StartTime),
				Seconds: seconds(e.StartTime, end), ExitCode: e.ExitCode, Reason: e.Reason, StderrTail: e.Error})
			if workflow.Shown(e) == ShownSkipped {
				p.Items[len(p.Items)-1].Shown, p.Items[len(p.Items)-1].Skipped = ShownSkipped, true
			}
		}
		out = append(out, p)
	}
	if q.Activity != "" && len(out) == 0 {
		return nil, fmt.Errorf("the workflow has no for_each activity %q", q.Activity)
	}
	return out, nil
}

// WriteItems writes pages of elements for people.
func WriteItems(w io.Writer, pages []ItemPage, c Colors) {
	for _, p := range pages {
		last := max(1, (p.Total+p.PageSize-1)/p.PageSize)
		fmt.Fprintf(w, "%s: %d elements, page %d of %d\n", inert.String(p.Activity), p.Total, p.Page, last)
		for _, it := range p.Items {
			exit := "-"
			if it.ExitCode != nil {
				exit = fmt.Sprint(*it.ExitCode)
			}
			shown := c.Activity(it.State)
			if it.Shown == ShownSkipped {
				shown = ShownSkipped
			}
			fmt.Fprintf(w, "  %-16s %s  attempt %d  started %s  took %s  exit %s\n", inert.String(it.Name),
				shown, max(it.Attempt, 1), clock(it.Started), took(it.Seconds), exit)
			if it.State.EndedBadly() && it.Reason != "" {
				fmt.Fprintf(w, "    why: %s\n", inert.String(it.Reason))
			}
			if tail := strings.TrimRight(it.StderrTail, "\n"); tail != "" && it.State.EndedBadly() {
				lines := inert.Lines(tail)
				for _, l := range lines[max(0, len(lines)-3):] {
					fmt.Fprintf(w, "    stderr: %s\n", l)
				}
			}
		}
	}
}

// LoadItems reads the execution and returns a page of its maps' elements.
func LoadItems(ctx context.Context, st workflow.Reader, id string, q ItemQuery, now time.Time) ([]ItemPage, error) {
	s, err := Load(ctx, st, id, now)
	if err != nil {
		return nil, err
	}
	acts, err := st.Activities(ctx, id)
	if _, err := state.Skipped(err); err != nil {
		return nil, err
	}
	return Items(s, acts, q, now)
}
