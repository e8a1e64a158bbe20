package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/clock"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/state"
)

// Tend implements launcher.Tender: every TendInterval it lists the Jobs
// this backend created in the namespaces it knows (its own, and each it
// created a Job in since it started) and, for each, reads its activity:
//
//   - a cancelled activity: its Job is deleted (foreground propagation,
//     so its pod goes first) once the activity's kill grace has passed
//     since it was cancelled, time the wrapper has to stop its command
//     and record the ending (at once for one cancelled before it ran);
//     so is the Job of an activity failed or timed out (by the monitor)
//     whose pod still runs;
//   - an activity still QUEUED whose Job failed (its wrapper ended
//     before claiming it): the activity is failed with the pod's reason;
//   - an activity QUEUED longer than its queued timeout (the
//     definition's, else definition.DefaultQueuedTimeout): it is failed
//     with the reason Kubernetes gives for the pod not running (its
//     container's waiting reason and the pod's warning events), and its
//     Job deleted. The monitor fails such an activity at the same
//     timeout without the reason; whichever write comes first wins.
//
// Each step is one conditional write or one idempotent delete, so a
// launcher that dies between two leaves nothing that the next round (of
// any launcher in the namespace) or the monitor cannot finish.
func (b *Backend) Tend(ctx context.Context, s launcher.Tending) {
	every := b.TendInterval
	if every <= 0 {
		every = DefaultTendInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b.remember(b.Namespace)
		b.mu.Lock()
		nss := make([]string, 0, len(b.namespaces))
		for ns := range b.namespaces {
			nss = append(nss, ns)
		}
		b.mu.Unlock()
		sort.Strings(nss)
		for _, ns := range nss {
			if err := b.tendNamespace(ctx, s, ns); err != nil && ctx.Err() == nil {
				b.log().Warn("looking after the Kubernetes Jobs failed; trying again at the next round", "namespace", ns, "error", err)
			}
		}
	}
}

// tendNamespace makes one round over the Jobs of one namespace.
func (b *Backend) tendNamespace(ctx context.Context, s launcher.Tending, ns string) error {
	list, err := b.Batch.Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelManagedBy + "=" + ManagedBy})
	if err != nil {
		return fmt.Errorf("list the Jobs of namespace %s: %w", ns, err)
	}
	// A Job that finished after its activity ended needs nothing more
	// until its TTL removes it: it is remembered, by UID, so that later
	// rounds read no item for it.
	b.mu.Lock()
	settled := b.settled[ns]
	b.mu.Unlock()
	still := map[types.UID]bool{}
	defer func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.settled == nil {
			b.settled = map[string]map[types.UID]bool{}
		}
		b.settled[ns] = still
	}()
	for i := range list.Items {
		if ctx.Err() != nil {
			return nil
		}
		job := &list.Items[i]
		if settled[job.UID] {
			still[job.UID] = true
			continue
		}
		over, err := b.tendJob(ctx, s, job)
		if over {
			still[job.UID] = true
		}
		if err != nil {
			b.log().Warn("looking after a Kubernetes Job failed", "job", ns+"/"+list.Items[i].Name, "error", err)
		}
	}
	return nil
}

// tendJob looks after one Job; settled is true when the Job finished and
// its activity ended (or is gone), so nothing more is to be done for it.
func (b *Backend) tendJob(ctx context.Context, s launcher.Tending, job *batchv1.Job) (settled bool, err error) {
	k := state.ActivityKey{ActivityExecID: job.Annotations[AnnotationActivity], WorkflowExecID: job.Annotations[AnnotationWorkflow]}
	if k.ActivityExecID == "" || k.WorkflowExecID == "" || job.DeletionTimestamp != nil {
		return false, nil
	}
	done, failed := finished(job)
	a, err := s.GetActivity(ctx, k)
	if errors.Is(err, state.ErrNotFound) {
		// Its workflow expired: nothing can record what it does.
		if !done {
			return false, b.deleteJob(ctx, job, "its activity no longer exists")
		}
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if done && a.State.Terminal() && a.State != state.Cancelled && a.State != state.CancelledRunning {
		return true, nil
	}
	return false, b.tendActivity(ctx, s, job, a, done, failed)
}

// tendActivity does what the activity a's state asks of its Job.
func (b *Backend) tendActivity(ctx context.Context, s launcher.Tending, job *batchv1.Job, a *state.ActivityExec, done, failed bool) error {
	k := a.ActivityKey
	now := clock.Now()
	switch {
	case a.State == state.Queued || a.State == state.Preparing:
		if failed {
			why, err := b.podReason(ctx, job)
			if err != nil {
				return err
			}
			_, err = s.FailQueued(ctx, k, fmt.Sprintf("its Kubernetes Job %s/%s failed before whimbrel-run claimed the activity%s", job.Namespace, job.Name, why))
			return err
		}
		timeout := parseDuration(job.Annotations[AnnotationQueuedTimeout], definition.DefaultQueuedTimeout)
		age := now.Sub(a.StateTime)
		if a.StateTime.IsZero() || age <= timeout {
			return nil
		}
		why, err := b.podReason(ctx, job)
		if err != nil {
			return err
		}
		reason := fmt.Sprintf("%s for %s, longer than the queued timeout %s: its pod never started%s", a.State, age.Round(time.Second), timeout, why)
		if ok, err := s.FailQueued(ctx, k, reason); err != nil || !ok {
			return err
		}
		b.log().Info("failed a launch whose pod never started", "activity_exec_id", k.ActivityExecID, "why", reason)
		return b.deleteJob(ctx, job, "its pod never started")
	case a.State == state.Cancelled:
		return b.deleteJob(ctx, job, "its activity was cancelled before it ran")
	case a.State == state.CancelledRunning || (!done && (a.State == state.Failed || a.State == state.TimedOut)):
		grace := parseDuration(job.Annotations[AnnotationKillGrace], state.DefaultKillGrace)
		if now.Sub(a.StateTime) < grace {
			return nil // the wrapper is still stopping its command
		}
		return b.deleteJob(ctx, job, "its activity is "+string(a.State))
	}
	return nil
}

// finished tells whether the Job ended, and whether it failed.
func finished(job *batchv1.Job) (done, failed bool) {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete, batchv1.JobSuccessCriteriaMet:
			done = true
		case batchv1.JobFailed, batchv1.JobFailureTarget:
			done, failed = true, true
		}
	}
	return done, failed
}

// deleteJob deletes the Job and, first, its pod (foreground
// propagation): a Job already gone is deleted.
func (b *Backend) deleteJob(ctx context.Context, job *batchv1.Job, why string) error {
	fg := metav1.DeletePropagationForeground
	err := b.Batch.Jobs(job.Namespace).Delete(ctx, job.Name, metav1.DeleteOptions{PropagationPolicy: &fg})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Kubernetes Job %s/%s: %w", job.Namespace, job.Name, err)
	}
	b.log().Info("deleted a Kubernetes Job", "job", job.Namespace+"/"+job.Name, "why", why)
	return nil
}

// maxReason bounds what podReason returns: it goes on the item.
const maxReason = 1024

// podReason is what Kubernetes says of the Job's pods, as ": …" (empty
// when it says nothing): each container's waiting or terminated reason
// and message, and the pod's warning events, newest last.
func (b *Backend) podReason(ctx context.Context, job *batchv1.Job) (string, error) {
	pods, err := b.Core.Pods(job.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job.Name})
	if err != nil {
		return "", fmt.Errorf("list the pods of Job %s/%s: %w", job.Namespace, job.Name, err)
	}
	var parts []string
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			switch {
			case cs.State.Waiting != nil:
				parts = append(parts, strings.TrimSpace(cs.State.Waiting.Reason+": "+cs.State.Waiting.Message))
			case cs.State.Terminated != nil:
				t := cs.State.Terminated
				parts = append(parts, strings.TrimSpace(fmt.Sprintf("%s (exit %d): %s", t.Reason, t.ExitCode, t.Message)))
			}
		}
		if len(p.Status.ContainerStatuses) == 0 && p.Status.Reason != "" {
			parts = append(parts, p.Status.Reason+": "+p.Status.Message)
		}
		events, err := b.Core.Events(job.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + p.Name})
		if err != nil {
			return "", fmt.Errorf("list the events of pod %s/%s: %w", job.Namespace, p.Name, err)
		}
		sort.SliceStable(events.Items, func(i, j int) bool { return events.Items[i].LastTimestamp.Before(&events.Items[j].LastTimestamp) })
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning {
				if msg := e.Reason + ": " + e.Message; !slices.Contains(parts, msg) {
					parts = append(parts, msg)
				}
			}
		}
	}
	if len(parts) == 0 {
		return "", nil
	}
	out := ": " + strings.Join(parts, "; ")
	if len(out) > maxReason {
		out = out[:maxReason] + "…"
	}
	return out, nil
}
