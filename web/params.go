package web

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/schedule"
)

// runParams is what an execution was started with beside its declared
// params (which the page shows from the execution itself): for a
// scheduled run, its schedule and fire time, and any WHIMBREL_PARAM_*
// variables in the definition's defaults.env (a schedule item may keep
// its values there), which every activity's environment holds. Executions
// started otherwise have none of these.
type runParams struct {
	Params   []param
	Schedule string
	FireTime string
}

func (p *runParams) empty() bool { return len(p.Params) == 0 && p.Schedule == "" && p.FireTime == "" }

// paramsOf reads them from a stored definition; one Whimbrel cannot parse
// has none to show (the page says what is wrong with the execution
// otherwise). A variable that a declared param of the execution sets is
// left out: the param's value is the one the command saw.
func paramsOf(stored, params string) *runParams {
	d, err := definition.FromJSON(stored)
	if err != nil || d == nil {
		return &runParams{}
	}
	declared := map[string]bool{}
	if m, err := definition.StoredParams(params); err == nil {
		for k := range m {
			declared[definition.ParamEnv(k)] = true
		}
	}
	prefix := definition.ParamEnv("")
	p := &runParams{Schedule: d.Defaults.Env[schedule.EnvSchedule], FireTime: d.Defaults.Env[schedule.EnvFireTime]}
	for k, v := range d.Defaults.Env {
		if name, ok := strings.CutPrefix(k, prefix); ok && name != "" && !declared[k] {
			p.Params = append(p.Params, param{Name: k, Value: v})
		}
	}
	sort.Slice(p.Params, func(i, j int) bool { return p.Params[i].Name < p.Params[j].Name })
	return p
}

// loadParams reads an execution's params. Its definition never changes,
// so the read is made once and kept.
func (s *Server) loadParams(ctx context.Context, id string) (*runParams, error) {
	v, _, err := s.reads.get(ctx, "params "+id, func(ctx context.Context) (any, bool, error) {
		wf, err := s.opts.Store.GetWorkflow(ctx, id)
		if err != nil {
			return nil, false, fmt.Errorf("read workflow %s: %w", id, err)
		}
		return paramsOf(wf.Definition, wf.Params), true, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*runParams), nil
}

// fireTime shows a fire time as the pages show times.
func fireTime(s string) string {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return s
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}
