package launcher

import "github.com/whimbrel/whimbrel/state"

// keep remembers the item a definition was parsed from, so that a later
// pass, which reads the workflow's state alone, can still hand the whole
// item to a backend that supervises in process (Job.Workflow). c.mu is
// held.
func (c *definitions) keep(wf *state.WorkflowExec) {
	if c.items == nil {
		c.items = map[string]*state.WorkflowExec{}
	}
	c.items[wf.WorkflowExecID] = wf
}

// item is the kept item of the workflow id with s, the state a pass just
// read, in place of the state it was first read in; nil if none is kept.
// The rest of the item is as first read: what a claim and an advance use
// of it (definition, parameters) never changes.
func (c *definitions) item(id string, s state.WorkflowState) *state.WorkflowExec {
	c.mu.Lock()
	defer c.mu.Unlock()
	wf := c.items[id]
	if wf == nil {
		return nil
	}
	cp := *wf
	cp.State = s
	return &cp
}

// ClaimRecorder is a Backend whose wrappers record what was launched
// (launched_as) in their claim's write for some jobs: an activity
// supervised in the launcher's own process, whose launch is known before
// its claim. The launcher then saves the write that would record it.
type ClaimRecorder interface {
	ClaimRecordsLaunch(j Job) bool
}

// claimRecords reports whether b's wrapper records j's launch in its
// claim.
func claimRecords(b Backend, j Job) bool {
	cr, ok := b.(ClaimRecorder)
	return ok && cr.ClaimRecordsLaunch(j)
}
