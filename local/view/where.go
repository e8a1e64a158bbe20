package view

import (
	"strings"

	"github.com/whimbrel/whimbrel/internal/inert"
	"github.com/whimbrel/whimbrel/local"
)

// where says where a launched activity that has not ended runs when that
// is not a process of this machine: a Kubernetes Job, by namespace/name,
// so that `kubectl logs` finds it while it runs.
func where(e local.Event) string {
	if job, ok := strings.CutPrefix(e.LaunchedAs, "kubernetes:"); ok && job != "" {
		return "  job " + inert.String(job)
	}
	return ""
}
