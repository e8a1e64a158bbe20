// Package fault lets tests kill a participant at a chosen point between two
// writes, to prove that what it leaves behind can be finished by repeating
// the step. Points only fire in binaries built with the whimbrel_fault tag
// and run with WHIMBREL_FAULT naming the point; release builds compile
// Point to nothing.
package fault

// Env names the variable that selects the point to die at.
const Env = "WHIMBREL_FAULT"

// ExitCode is the status a process exits with when it dies at a point.
const ExitCode = 99

// Points the code declares.
const (
	// AfterFinish: the wrapper recorded the activity's end but has not
	// advanced the workflow.
	AfterFinish = "after-finish"
	// AfterCommandStart: the runner started the command (and handed its
	// process group to the guard) and has done nothing else.
	AfterCommandStart = "after-command-start"
	// MidPage: a participant wrote a for_each map's account announcing a
	// page of elements, and half of the page's elements.
	MidPage = "mid-page"
	// AfterClaim: a launcher moved an activity to QUEUED (with its pool
	// slots taken) and has not called the backend.
	AfterClaim = "after-claim"
)

// Hang, after a point's name in WHIMBREL_FAULT, makes the process stop at
// the point instead of exiting: it says so on stderr and waits there, so
// that a test can kill it with SIGKILL as it stands.
const Hang = "@hang"
