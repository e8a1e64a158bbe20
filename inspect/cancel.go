package inspect

import (
	"fmt"
	"io"

	"github.com/whimbrel/whimbrel/workflow"
)

// WriteCancelled says what cancelling workflow id did (whimbrel cancel).
func WriteCancelled(w io.Writer, id string, res workflow.Cancelled) error {
	if res.Workflow {
		fmt.Fprintf(w, "cancelled workflow %s\n", id)
	} else {
		fmt.Fprintf(w, "workflow %s was already cancelled\n", id)
	}
	fmt.Fprintf(w, "  %d pending activities cancelled, %d running ones told to stop (their wrappers stop them: at once on the embedded store, at their next heartbeat on DynamoDB)\n",
		len(res.Pending), len(res.Running))
	if n := len(res.Undecodable); n > 0 {
		fmt.Fprintf(w, "  %d activities could not be decoded and were left as they are (see the warnings on stderr): fix or delete them\n", n)
	}
	return nil
}
