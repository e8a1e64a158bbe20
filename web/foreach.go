package web

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/whimbrel/whimbrel/inspect"
	"github.com/whimbrel/whimbrel/state"
)

// A for_each map is one node of the DAG, with a progress bar, and its
// elements are listed on a page of their own, a page at a time
// (docs/for-each.md).

// mapBar is the width of a map's progress bar in a node 190 wide.
func mapBar(c *inspect.MapCounts) int {
	if c == nil || c.Items <= 0 {
		return 0
	}
	return 190 * min(c.Completed+c.Failed+c.Cancelled, c.Items) / c.Items
}

// itemsView is the page of a map's elements.
type itemsView struct {
	ID      string
	Pages   []inspect.ItemPage
	Problem *problem
	Query   inspect.ItemQuery
	Prev    string // the previous page's URL, if any
	Next    string // the next page's URL, if any
}

// itemsPage lists a page of the elements of the execution's maps:
// ?activity=NAME, ?state=FAILED, ?page=N.
func (s *Server) itemsPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	q := r.URL.Query()
	v := &itemsView{ID: id, Query: inspect.ItemQuery{Activity: q.Get("activity"), State: state.ActivityState(q.Get("state")), PageSize: 50}}
	v.Query.Page, _ = strconv.Atoi(q.Get("page"))
	v.Query.Page = max(v.Query.Page, 1)
	if v.Query.State != "" && !v.Query.State.Valid() {
		v.Problem = &problem{Status: http.StatusBadRequest, Title: "Not a state", Detail: "state " + strconv.Quote(string(v.Query.State)) + " is not an activity state"}
	} else {
		pages, err := s.loadItems(r.Context(), id, v.Query)
		if err != nil {
			v.Problem = problemOf(err, "the elements of "+id)
		}
		v.Pages = pages
	}
	link := func(page int) string {
		u := url.Values{"page": {strconv.Itoa(page)}}
		if v.Query.Activity != "" {
			u.Set("activity", v.Query.Activity)
		}
		if v.Query.State != "" {
			u.Set("state", string(v.Query.State))
		}
		return "/workflows/" + url.PathEscape(id) + "/items?" + u.Encode()
	}
	more := false
	for _, p := range v.Pages {
		more = more || p.Total > p.Page*p.PageSize
	}
	if v.Query.Page > 1 {
		v.Prev = link(v.Query.Page - 1)
	}
	if more {
		v.Next = link(v.Query.Page + 1)
	}
	if wantsJSON(r) {
		if v.Problem != nil {
			writeJSONError(w, v.Problem.Status, v.Problem.Detail)
			return
		}
		writeJSON(w, r, http.StatusOK, v.Pages)
		return
	}
	s.render(w, r, statusOf(v.Problem), "items.html", page{Title: id, View: v})
}

func (s *Server) loadItems(ctx context.Context, id string, q inspect.ItemQuery) ([]inspect.ItemPage, error) {
	if _, err := state.WorkflowNameOf(id); err != nil {
		return nil, &state.NotFoundError{Kind: "workflow execution", ID: id}
	}
	return inspect.LoadItems(ctx, s.opts.Store, id, q, s.opts.Now())
}
