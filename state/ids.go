package state

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// IDs take the contract's forms (docs/contract.md#ids):
// `(workflow_name)::(uuid)` for a workflow
// execution or request, `(activity_name)::(uuid)` for an activity execution,
// and `(activity_exec_id):(index)` for a dependency item.

// idSeparator separates a name from its UUID.
const idSeparator = "::"

// namespace seeds the name-based UUIDs that make IDs derivable: writing a
// workflow twice yields the same IDs, so a retried start overwrites rather
// than duplicates.
var namespace = uuid.MustParse("1b0e3c0f-5d7a-4d8e-9c43-0f6b2d7c9a51")

// MaxNameLength bounds workflow and activity names. Each name appears
// twice in a running activity's item (in its ID and on its own), and the
// item must stay under 1 KB so that a heartbeat costs one write unit.
const MaxNameLength = 48

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// CheckName returns an error unless name is usable as a workflow or activity
// name: 1 to MaxNameLength letters, digits, '_', '.', '-', starting with a
// letter or digit. Names become part of IDs, so ':' and spaces are refused.
func CheckName(name string) error {
	if !namePattern.MatchString(name) || len(name) > MaxNameLength {
		return fmt.Errorf("name %q is invalid: use 1 to %d letters, digits, '_', '.' or '-', starting with a letter or digit", name, MaxNameLength)
	}
	return nil
}

// NewWorkflowExecID returns a fresh execution ID for the named workflow.
func NewWorkflowExecID(workflowName string) string {
	return workflowName + idSeparator + uuid.NewString()
}

// WorkflowExecIDForRequest derives the execution ID that the given request
// starts, so that a request retried after a crash lands on the same
// execution.
func WorkflowExecIDForRequest(workflowName, requestID string) string {
	return workflowName + idSeparator + uuid.NewSHA1(namespace, []byte("request/"+requestID)).String()
}

// NewWorkflowRequestID returns a fresh request ID for the named workflow.
func NewWorkflowRequestID(workflowName string) string {
	return workflowName + idSeparator + uuid.NewString()
}

// ActivityExecIDFor derives the ID of the named activity in a workflow
// execution.
func ActivityExecIDFor(workflowExecID, activityName string) string {
	return activityName + idSeparator + uuid.NewSHA1(namespace, []byte(workflowExecID+"/"+activityName)).String()
}

// DependencyID is the key of the index-th dependency item of an activity.
func DependencyID(activityExecID string, index int) string {
	return activityExecID + ":" + strconv.Itoa(index)
}

// SplitID splits a `(name)::(uuid)` ID into its name and UUID.
func SplitID(id string) (name, u string, err error) {
	i := strings.LastIndex(id, idSeparator)
	if i < 0 {
		return "", "", fmt.Errorf("id %q is not of the form NAME::UUID", id)
	}
	name, u = id[:i], id[i+len(idSeparator):]
	if err := CheckName(name); err != nil {
		return "", "", fmt.Errorf("id %q: %w", id, err)
	}
	if _, err := uuid.Parse(u); err != nil {
		return "", "", fmt.Errorf("id %q: %q is not a UUID", id, u)
	}
	return name, u, nil
}

// WorkflowNameOf returns the workflow name inside a workflow execution or
// request ID.
func WorkflowNameOf(id string) (string, error) {
	name, _, err := SplitID(id)
	return name, err
}

// RetryIDFor derives the ID of the attempt that retries the given failed
// one. It depends only on the failed attempt's ID, so every participant
// that decides the retry names the same item, and a conditional create
// lets exactly one of them write it.
func RetryIDFor(failedActivityExecID string) string {
	name, _, err := SplitID(failedActivityExecID)
	if err != nil {
		name = "retry"
	}
	return name + idSeparator + uuid.NewSHA1(namespace, []byte("retry/"+failedActivityExecID)).String()
}

// ItemExecIDFor derives the ID of the first attempt of element index of
// a for_each activity's list. Its name part is the activity's, so every
// reader that takes an activity's name from its ID finds it; its UUID is
// the element's, so a page of elements written twice creates nothing
// twice. Later attempts derive from it (RetryIDFor).
func ItemExecIDFor(workflowExecID, activityName string, index int) string {
	return activityName + idSeparator + uuid.NewSHA1(namespace, []byte(workflowExecID+"/"+activityName+"["+strconv.Itoa(index)+"]")).String()
}
