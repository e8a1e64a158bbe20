// Package kubernetes is the launcher's Kubernetes backend: it starts each
// activity attempt as a batch/v1 Job whose container runs whimbrel-run,
// and looks after the Jobs it started while the launcher runs. Only a
// binary that serves the kubernetes launch type links it, and with it
// client-go.
package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	batchv1client "k8s.io/client-go/kubernetes/typed/batch/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/whimbrel/whimbrel/launcher"
)

// Defaults of Backend.
const (
	// DefaultTTL is how long a finished Job (and its pod, with its logs)
	// is kept before Kubernetes deletes it: the outcome is on the
	// activity's item, the logs are for a person looking soon after.
	DefaultTTL = time.Hour
	// DefaultTendInterval is how often the Jobs the launcher started are
	// looked after (cancelled ones deleted, pods that never start failed).
	DefaultTendInterval = 10 * time.Second
)

// LaunchedAsPrefix starts the launched_as of every Job this backend
// creates: "kubernetes:NAMESPACE/NAME".
const LaunchedAsPrefix = "kubernetes:"

// Backend starts each activity attempt as a batch/v1 Job, with
// backoffLimit 0 (Whimbrel's retry decides retries) and a name derived
// from the attempt's launch token, so a repeated launch is AlreadyExists,
// never a second Job. The wrapper's identity and the activity's settings
// go in as the container's environment; the activity's command, if any,
// as its args (the image's entrypoint is whimbrel-run).
//
// A quota that is exhausted (Forbidden, "exceeded quota"), throttling,
// server errors and an unreachable API server come back as
// launcher.TemporaryError, so the launcher tries again under the same
// name; anything else fails the activity with the API server's message.
type Backend struct {
	Batch batchv1client.JobsGetter
	Core  interface {
		corev1client.PodsGetter
		corev1client.EventsGetter
	}
	// Namespace of activities whose definition names none.
	Namespace string
	// TTL is the Jobs' ttlSecondsAfterFinished (default DefaultTTL).
	TTL time.Duration
	// TendInterval is the time between two rounds of Tend (default
	// DefaultTendInterval).
	TendInterval time.Duration
	Logger       hclog.Logger

	mu         sync.Mutex
	namespaces map[string]bool               // those this launcher created Jobs in
	settled    map[string]map[types.UID]bool // by namespace: Jobs Tend need not read again
}

var (
	_ launcher.Backend = (*Backend)(nil)
	_ launcher.Tender  = (*Backend)(nil)
)

// Launch implements launcher.Backend.
func (b *Backend) Launch(ctx context.Context, j launcher.Job) (string, error) {
	ns := j.Settings.Launch.Namespace
	if ns == "" {
		ns = b.Namespace
	}
	job, err := b.job(j, ns)
	if err != nil {
		return "", err
	}
	b.remember(ns)
	launchedAs := LaunchedAsPrefix + ns + "/" + job.Name
	_, err = b.Batch.Jobs(ns).Create(ctx, job, metav1.CreateOptions{FieldManager: "whimbrel"})
	switch {
	case err == nil, apierrors.IsAlreadyExists(err):
		// AlreadyExists: an earlier launch of this attempt (whose answer
		// was lost, or whose launcher died) created it.
		return launchedAs, nil
	case temporary(err):
		return "", &launcher.TemporaryError{Err: fmt.Errorf("create Kubernetes Job %s/%s: %w", ns, job.Name, err)}
	default:
		return "", fmt.Errorf("create Kubernetes Job %s/%s: %w", ns, job.Name, err)
	}
}

// temporary tells the errors of an API call that may pass: a quota that
// is exhausted now (a Job ending frees it), throttling, the server's own
// failures and timeouts, and a server that cannot be reached.
func temporary(err error) bool {
	if apierrors.IsForbidden(err) {
		return strings.Contains(err.Error(), "exceeded quota")
	}
	if apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsUnexpectedServerError(err) {
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Code >= 500
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "connection refused")
}

// remember notes a namespace the launcher created a Job in, for Tend.
func (b *Backend) remember(ns string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.namespaces == nil {
		b.namespaces = map[string]bool{}
	}
	b.namespaces[ns] = true
}

func (b *Backend) log() hclog.Logger {
	if b.Logger == nil {
		return hclog.NewNullLogger()
	}
	return b.Logger
}
