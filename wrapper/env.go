package wrapper

import (
	"strings"

	"github.com/whimbrel/whimbrel/state"
)

// The command inherits the wrapper's environment, except Whimbrel's own
// variables: of those it gets only the ones it is meant to read. The
// others configure the wrapper (its timeouts, guard, logging, data folder,
// API), wire it to its launcher (the guard descriptor, the nudge address,
// the guard process's marker) or are a secret the command has no use for
// (WHIMBREL_WEB_TOKEN, the web view's token, when `whimbrel run --web`
// starts the wrapper): a command that could read them could impersonate
// what set them. The definition's env is laid over what is left, so an
// activity that needs one of them asks for it by name.
//
// What the command gets (docs/security.md lists it for users):
//   - the activity's identity: WHIMBREL_ACTIVITY_EXEC_ID,
//     WHIMBREL_ACTIVITY_NAME, WHIMBREL_WORKFLOW_EXEC_ID,
//     WHIMBREL_WORKFLOW_NAME, always set from the claimed item;
//   - the data files: WHIMBREL_INPUTS, WHIMBREL_OUTPUT, WHIMBREL_PROGRESS;
//   - the run's parameters, WHIMBREL_PARAM_<NAME>, and a scheduled run's
//     WHIMBREL_SCHEDULE and WHIMBREL_FIRE_TIME;
//   - where the state is, so that the command may run whimbrel itself:
//     WHIMBREL_STORE and WHIMBREL_TABLE_PREFIX.
var commandKeeps = map[string]bool{
	state.EnvActivityExecID: true, state.EnvActivityName: true,
	state.EnvWorkflowExecID: true, state.EnvWorkflowName: true,
	state.EnvInputs: true, state.EnvOutput: true, state.EnvProgress: true,
	"WHIMBREL_SCHEDULE": true, "WHIMBREL_FIRE_TIME": true,
	"WHIMBREL_STORE": true, "WHIMBREL_TABLE_PREFIX": true,
}

// inheritable reports whether the command inherits a variable of the
// wrapper's environment.
func inheritable(key string) bool {
	if !strings.HasPrefix(key, "WHIMBREL_") {
		return true
	}
	return commandKeeps[key] || strings.HasPrefix(key, "WHIMBREL_PARAM_")
}

// identityEnv sets the activity's identity from the claimed item, whether
// the wrapper learnt it from flags or from its environment.
func identityEnv(env map[string]string, a *state.ActivityExec) {
	for k, v := range map[string]string{state.EnvActivityExecID: a.ActivityExecID, state.EnvActivityName: a.ActivityName,
		state.EnvWorkflowExecID: a.WorkflowExecID, state.EnvWorkflowName: a.WorkflowName} {
		if v != "" {
			env[k] = v
		}
	}
}
