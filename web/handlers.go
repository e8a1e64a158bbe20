package web

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

//go:embed assets
var assets embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"clock": func(t *time.Time) string {
		if t == nil {
			return "–"
		}
		return t.UTC().Format("2006-01-02 15:04:05")
	},
	"hms": func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.UTC().Format("15:04:05")
	},
	"iso": func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	},
	"path":   url.PathEscape,
	"fire":   fireTime,
	"mapBar": mapBar,
	"indent": func(depth int) string {
		return strings.Repeat("\u00a0\u00a0", min(max(depth, 0), 20))
	},
}).ParseFS(assets, "assets/templates/*.html"))

// page is what the layout needs around a view.
type page struct {
	Title   string
	LiveSrc string // the fragment an open page polls, if any
	Final   bool   // nothing can change: the page does not poll
	View    any
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets/static")
	files := http.StripPrefix("/static/", http.FileServerFS(static))
	mux.Handle("GET /static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=300")
		files.ServeHTTP(w, r)
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /{$}", s.listPage)
	mux.HandleFunc("GET /fragments/workflows", s.listFragment)
	mux.HandleFunc("GET /workflows/{id}", s.workflowPage)
	mux.HandleFunc("GET /fragments/workflows/{id}", s.workflowFragment)
	mux.HandleFunc("GET /workflows/{id}/items", s.itemsPage)
	mux.HandleFunc("POST /workflows/{id}/{action}", s.act)
	mux.HandleFunc("GET /api/workflows", s.apiList)
	mux.HandleFunc("GET /api/workflows/{id}", s.apiWorkflow)
	mux.HandleFunc("POST /api/workflows/{id}/{action}", s.act)
	mux.HandleFunc("GET /schedules", s.schedulesPage)
	mux.HandleFunc("GET /fragments/schedules", s.schedulesFragment)
	mux.HandleFunc("GET /schedules/{name}", s.schedulePage)
	mux.HandleFunc("GET /fragments/schedules/{name}", s.scheduleFragment)
	mux.HandleFunc("GET /api/schedules", s.apiSchedules)
	mux.HandleFunc("GET /api/schedules/{name}", s.apiSchedule)
	if s.opts.Metrics != nil {
		// Behind the token like every page: Prometheus sends it as
		// "Authorization: Bearer TOKEN" (its authorization setting).
		mux.Handle("GET /metrics", s.opts.Metrics)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if wantsJSON(r) {
			writeJSONError(w, http.StatusNotFound, "no such endpoint")
			return
		}
		s.renderError(w, r, http.StatusNotFound, "Not found", "There is no page at this address.")
	})
	// Cross-origin protection refuses a state-changing request a browser
	// marks as coming from another site, before the CSRF value is checked.
	return secure(s.guard(http.NewCrossOriginProtection().Handler(mux)))
}

func withAuth(ctx context.Context, k authKind) context.Context {
	return context.WithValue(ctx, authKey{}, k)
}

func authOf(ctx context.Context) authKind {
	k, _ := ctx.Value(authKey{}).(authKind)
	return k
}

func wantsJSON(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/api/") || strings.Contains(r.Header.Get("Accept"), "application/json") && !strings.Contains(r.Header.Get("Accept"), "text/html")
}

// send writes body with an ETag, or 304 Not Modified when the client holds
// it already.
func send(w http.ResponseWriter, r *http.Request, status int, contentType string, body []byte) {
	w.Header().Set("Content-Type", contentType)
	if status == http.StatusOK {
		sum := sha256.Sum256(body)
		etag := `"` + hex.EncodeToString(sum[:16]) + `"`
		w.Header().Set("ETag", etag)
		if match := r.Header.Get("If-None-Match"); match != "" && etagMatch(match, etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

func etagMatch(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	var b bytes.Buffer
	if err := pages.ExecuteTemplate(&b, name, data); err != nil {
		s.log.Error("render a page", "template", name, "error", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	send(w, r, status, "text/html; charset=utf-8", b.Bytes())
}

func (s *Server) renderError(w http.ResponseWriter, r *http.Request, status int, title, detail string) {
	s.render(w, r, status, "error.html", page{Title: title, Final: true, View: &problem{Status: status, Title: title, Detail: detail}})
}

func writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		writeJSONError(w, http.StatusInternalServerError, "encode the answer: "+err.Error())
		return
	}
	send(w, r, status, "application/json", append(b, '\n'))
}

func writeJSONError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func statusOf(p *problem) int {
	if p == nil {
		return http.StatusOK
	}
	return p.Status
}

// listQueryOf reads the listing's filters from the address. Values it
// does not know are dropped rather than refused: the address is typed by
// people.
func listQueryOf(r *http.Request) listQuery {
	q := r.URL.Query()
	lq := listQuery{Name: strings.TrimSpace(q.Get("workflow")), Since: "24h"}
	if err := state.CheckName(lq.Name); err != nil {
		lq.Name = ""
	}
	for _, st := range workflowStates {
		if q.Get("state") == st {
			lq.State = st
		}
	}
	if v := q.Get("since"); v == "all" {
		lq.Since = v
	} else if _, ok := sinceOf(v); ok {
		lq.Since = v
	}
	if n, err := strconv.Atoi(q.Get("page")); err == nil && n > 0 && n < 1000 {
		lq.Page = n
	}
	return lq
}

func (q listQuery) values(page int) url.Values {
	v := url.Values{}
	if q.Name != "" {
		v.Set("workflow", q.Name)
	}
	if q.State != "" {
		v.Set("state", q.State)
	}
	v.Set("since", q.Since)
	if page > 0 {
		v.Set("page", strconv.Itoa(page))
	}
	return v
}

func (s *Server) listView(r *http.Request) *listView {
	q := listQueryOf(r)
	v := &listView{Query: q, States: workflowStates, Sinces: sinces, Filtered: q.Name != "" || q.State != ""}
	v.LiveSrc = "/fragments/workflows?" + q.values(q.Page).Encode()
	rows, err := s.loadList(r.Context(), q)
	if err != nil {
		v.Problem = problemOf(err, "the list of executions")
		return v
	}
	from := min(q.Page*pageSize, len(rows))
	to := min(from+pageSize, len(rows))
	for _, w := range rows[from:to] {
		lr := listRow{Workflow: w, look: workflowLook(w.State)}
		if w.Ended != nil {
			lr.Took = took(w.Seconds)
		}
		v.Rows = append(v.Rows, lr)
	}
	if len(rows) > to {
		v.Next = "/?" + q.values(q.Page+1).Encode()
	}
	if q.Page > 0 {
		v.Prev = "/?" + q.values(q.Page-1).Encode()
	}
	return v
}

func (s *Server) listPage(w http.ResponseWriter, r *http.Request) {
	v := s.listView(r)
	s.render(w, r, statusOf(v.Problem), "list.html", page{Title: "Workflow executions", LiveSrc: v.LiveSrc, View: v})
}

func (s *Server) listFragment(w http.ResponseWriter, r *http.Request) {
	v := s.listView(r)
	s.render(w, r, statusOf(v.Problem), "list-live", v)
}

func (s *Server) workflowPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	v := s.workflowView(r.Context(), id, authOf(r.Context()) == authCookie)
	p := page{Title: id, LiveSrc: "/fragments/workflows/" + url.PathEscape(id), Final: v.Final, View: v}
	s.render(w, r, statusOf(v.Problem), "workflow.html", p)
}

func (s *Server) workflowFragment(w http.ResponseWriter, r *http.Request) {
	v := s.workflowView(r.Context(), r.PathValue("id"), authOf(r.Context()) == authCookie)
	s.render(w, r, statusOf(v.Problem), "workflow-live", v)
}

func (s *Server) apiList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	sq := state.WorkflowQuery{Name: q.Get("workflow"), State: state.WorkflowState(q.Get("state")), Limit: pageSize}
	if sq.State != "" && !sq.State.Valid() {
		writeJSONError(w, http.StatusBadRequest, fmt.Sprintf("state %q is none of %s", sq.State, strings.Join(workflowStates, ", ")))
		return
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeJSONError(w, http.StatusBadRequest, "limit must be a number, 0 or more (0: all)")
			return
		}
		sq.Limit = n
	}
	since := "24h"
	if v := q.Get("since"); v != "" {
		since = v
	}
	var age time.Duration
	if since != "0" && since != "all" {
		d, err := definition.ParseDuration(since)
		if err != nil || d < 0 {
			writeJSONError(w, http.StatusBadRequest, fmt.Sprintf("since %q is not a duration such as 30m, 24h or 7d (0: all)", since))
			return
		}
		age = d
	}
	key := fmt.Sprintf("api list %q %q %d %d", sq.Name, sq.State, sq.Limit, age)
	v, _, err := s.reads.get(r.Context(), key, func(ctx context.Context) (any, bool, error) {
		now := s.opts.Now()
		if age > 0 {
			sq.Since = now.Add(-age)
		}
		rows, err := inspectList(ctx, s.opts.Store, sq, now)
		return rows, false, err
	})
	if err != nil {
		p := problemOf(err, "the list of executions")
		writeJSONError(w, p.Status, p.Detail)
		return
	}
	writeJSON(w, r, http.StatusOK, v)
}

func (s *Server) apiWorkflow(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	st, err := s.loadStatus(r.Context(), id)
	if err != nil {
		p := problemOf(err, "workflow execution "+id)
		writeJSONError(w, p.Status, p.Detail)
		return
	}
	writeJSON(w, r, http.StatusOK, st.s)
}

// maxForm bounds the body of an action.
const maxForm = 64 << 10

// act cancels or reruns an execution, for a form (answered with a
// redirect) or an API client (answered with JSON).
func (s *Server) act(w http.ResponseWriter, r *http.Request) {
	id, action := r.PathValue("id"), r.PathValue("action")
	api := strings.HasPrefix(r.URL.Path, "/api/")
	fail := func(status int, title, detail string) {
		if api {
			writeJSONError(w, status, detail)
			return
		}
		s.renderError(w, r, status, title, detail)
	}
	if action != "cancel" && action != "rerun" {
		fail(http.StatusNotFound, "Not found", "The actions are cancel and rerun.")
		return
	}
	if !s.opts.AllowActions {
		fail(http.StatusForbidden, "Read-only", "This web view is read-only: start whimbrel web with --allow-actions to cancel or rerun from it.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if !s.csrfOK(r) {
		fail(http.StatusForbidden, "Refused", "The request carries no valid CSRF value: use the buttons of the page, or an API client with Authorization: Bearer.")
		return
	}
	who := fmt.Sprintf("%s from %s", authOf(r.Context()), r.RemoteAddr)
	if fwd := r.Header.Get("X-Forwarded-For"); fwd != "" {
		who += " (forwarded for " + fwd + ")"
	}
	ctx, cancel := context.WithTimeout(r.Context(), 4*s.opts.StoreTimeout)
	defer cancel()
	to := id
	var err error
	switch action {
	case "cancel":
		var res workflow.Cancelled
		res, err = workflow.Cancel(ctx, s.opts.Store, id, "cancelled from the web view", s.log)
		if err == nil {
			s.log.Info("cancelled a workflow", "workflow_exec_id", id, "who", who, "at", s.opts.Now().UTC(),
				"pending", len(res.Pending), "running", len(res.Running))
		}
	case "rerun":
		fromFailure := r.PostFormValue("from_failure") == "1" || r.URL.Query().Get("from_failure") == "1"
		to, err = workflow.Rerun(ctx, s.opts.Store, id, fromFailure, workflow.StartOptions{Source: "whimbrel web"})
		if err == nil {
			s.log.Info("reran a workflow", "workflow_exec_id", id, "new_workflow_exec_id", to, "from_failure", fromFailure,
				"who", who, "at", s.opts.Now().UTC())
		}
	}
	s.reads.forget("status " + id)
	s.reads.forget("reruns " + id)
	var ce *state.ConflictError
	switch {
	case errors.As(err, &ce):
		fail(http.StatusConflict, "Nothing to do", fmt.Sprintf("Workflow %s is %s: %v", id, ce.State, err))
		return
	case err != nil:
		p := problemOf(err, "workflow execution "+id)
		fail(p.Status, p.Title, p.Detail)
		return
	}
	if api {
		writeJSON(w, r, http.StatusOK, map[string]string{"action": action, "workflow_exec_id": to})
		return
	}
	http.Redirect(w, r, "/workflows/"+url.PathEscape(to), http.StatusSeeOther)
}
