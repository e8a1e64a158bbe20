package state

import (
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// ChildRequestID derives the request ID of the child workflow that one
// attempt of a parent activity runs (docs/contract.md#child-workflows):
// from the parent execution, the activity's item (an attempt, or a
// for_each item's attempt, has an item of its own), the item's index in
// its map (-1 for an activity that maps nothing) and the attempt. Every
// launcher and repair that starts the child names the same request, and
// a request starts at most one execution: one child per attempt.
func ChildRequestID(childName, parentWorkflowExecID, parentActivityExecID string, index, attempt int) string {
	key := "child/" + parentWorkflowExecID + "/" + parentActivityExecID + "/" + strconv.Itoa(index) + "/" + strconv.Itoa(attempt)
	return childName + idSeparator + uuid.NewSHA1(namespace, []byte(key)).String()
}

// childOwnerPrefix marks the owner of a parent activity: the child
// execution holds it, not a wrapper.
const childOwnerPrefix = "child:"

// ChildOwner is the owner token a parent activity is claimed with while
// the child execution childID runs it: it names the child, and fences the
// parent's final write as a wrapper's token does.
func ChildOwner(childID string) string { return childOwnerPrefix + childID }

// ChildOf returns the child execution that holds a parent activity, from
// its owner; ok is false for an activity no child holds.
func ChildOf(a *ActivityExec) (childID string, ok bool) {
	if a == nil {
		return "", false
	}
	childID, ok = strings.CutPrefix(a.Owner, childOwnerPrefix)
	if !ok || childID == "" {
		return "", false
	}
	return childID, true
}
