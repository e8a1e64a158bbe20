package web

import (
	"context"
	"errors"
	"net/http"

	"github.com/whimbrel/whimbrel/schedule"
	"github.com/whimbrel/whimbrel/state"
)

// scheduleJSON is a schedule as the API answers it: what `whimbrel
// schedule list --json` (last_run) and `whimbrel schedule show --json`
// (run_log, each line with its run's state and error) print.
type scheduleJSON struct {
	*state.Schedule
	LastRun *schedule.RunStatus  `json:"last_run,omitempty"`
	Log     []schedule.RunStatus `json:"run_log,omitempty"`
}

// schedules is the store's schedules, when it keeps them.
func (s *Server) schedules() (schedule.Store, bool) {
	ss, ok := s.opts.Store.(schedule.Store)
	return ss, ok
}

func (s *Server) apiSchedules(w http.ResponseWriter, r *http.Request) {
	ss, ok := s.schedules()
	if !ok {
		writeJSONError(w, http.StatusNotFound, "this store keeps no schedules")
		return
	}
	v, _, err := s.reads.get(r.Context(), "api schedules", func(ctx context.Context) (any, bool, error) {
		all, err := ss.Schedules(ctx)
		if err != nil {
			return nil, false, err
		}
		out := []scheduleJSON{} // [] rather than null
		for _, sc := range all {
			v := scheduleJSON{Schedule: sc}
			run, ok, err := schedule.LastRun(ctx, ss, sc)
			if err != nil {
				return nil, false, err
			}
			if ok {
				v.LastRun = &run
			}
			sc.Definition = ""
			out = append(out, v)
		}
		return out, false, nil
	})
	if err != nil {
		p := problemOf(err, "the schedules")
		writeJSONError(w, p.Status, p.Detail)
		return
	}
	writeJSON(w, r, http.StatusOK, v)
}

func (s *Server) apiSchedule(w http.ResponseWriter, r *http.Request) {
	ss, ok := s.schedules()
	if !ok {
		writeJSONError(w, http.StatusNotFound, "this store keeps no schedules")
		return
	}
	name := r.PathValue("name")
	v, _, err := s.reads.get(r.Context(), "api schedule "+name, func(ctx context.Context) (any, bool, error) {
		sc, err := ss.GetSchedule(ctx, name)
		if err != nil {
			return nil, false, err
		}
		runs, err := schedule.Runs(ctx, ss, sc)
		if err != nil {
			return nil, false, err
		}
		sc.Definition, sc.Runs = "", nil
		return scheduleJSON{Schedule: sc, Log: runs}, false, nil
	})
	if errors.Is(err, state.ErrNotFound) {
		writeJSONError(w, http.StatusNotFound, "no schedule "+name)
		return
	}
	if err != nil {
		p := problemOf(err, "schedule "+name)
		writeJSONError(w, p.Status, p.Detail)
		return
	}
	writeJSON(w, r, http.StatusOK, v)
}
