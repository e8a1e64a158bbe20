package kubernetes

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"regexp"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/state"
)

// The labels and annotations of every Job this backend creates. Labels
// hold names made fit for a label (at most 63 characters of letters,
// digits, '-', '_' and '.'); the annotations hold the IDs as they are.
const (
	LabelManagedBy     = "app.kubernetes.io/managed-by"
	ManagedBy          = "whimbrel"
	LabelWorkflow      = "whimbrel.io/workflow"
	LabelActivity      = "whimbrel.io/activity"
	AnnotationActivity = "whimbrel.io/activity-exec-id"
	AnnotationWorkflow = "whimbrel.io/workflow-exec-id"
	// AnnotationKillGrace and AnnotationQueuedTimeout carry the
	// activity's settings that Tend needs, so it reads no definition.
	AnnotationKillGrace     = "whimbrel.io/kill-grace"
	AnnotationQueuedTimeout = "whimbrel.io/queued-timeout"
)

// StopMargin is added to the activity's kill grace for the pod's
// terminationGracePeriodSeconds: the wrapper relays SIGTERM, kills its
// command after the kill grace, then needs a moment to record the ending
// before the kubelet's SIGKILL.
const StopMargin = 10 * time.Second

// maxName is the longest Job name whose pods can still carry it as the
// job-name label.
const maxName = 63

var notNameChar = regexp.MustCompile(`[^a-z0-9]+`)

// JobName is the Job's name for the launch j: "wb-", the activity's name
// made fit for a DNS-1123 label, and a hash of the launch token, at most
// 63 characters. The same launch always gets the same name, so a repeat
// is refused as AlreadyExists.
func JobName(j launcher.Job) string {
	sum := sha256.Sum256([]byte(j.LaunchToken()))
	hash := hex.EncodeToString(sum[:])[:12]
	slug := strings.Trim(notNameChar.ReplaceAllString(strings.ToLower(j.ActivityName), "-"), "-")
	if room := maxName - len("wb--") - len(hash); len(slug) > room {
		slug = strings.TrimRight(slug[:room], "-")
	}
	if slug == "" {
		return "wb-" + hash
	}
	return "wb-" + slug + "-" + hash
}

var notLabelChar = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// labelValue makes s fit for a label value.
func labelValue(s string) string {
	v := notLabelChar.ReplaceAllString(s, "_")
	if len(v) > 63 {
		v = v[:63]
	}
	return strings.Trim(v, "._-")
}

// job builds the Job of the launch j in namespace ns: from the
// definition's job_template when it names one, else from nothing.
func (b *Backend) job(j launcher.Job, ns string) (*batchv1.Job, error) {
	l := j.Settings.Launch
	job := &batchv1.Job{}
	if l.JobTemplate != "" {
		var err error
		if job, err = readTemplate(l.JobTemplate); err != nil {
			return nil, err
		}
	}
	job.TypeMeta = metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}
	job.Name, job.GenerateName, job.Namespace = JobName(j), "", ns
	job.ResourceVersion, job.UID = "", ""
	grace := time.Duration(j.Settings.KillGrace)
	if grace <= 0 {
		grace = state.DefaultKillGrace
	}
	labels := map[string]string{LabelManagedBy: ManagedBy, LabelWorkflow: labelValue(j.WorkflowName), LabelActivity: labelValue(j.ActivityName)}
	annotations := map[string]string{AnnotationActivity: j.Key.ActivityExecID, AnnotationWorkflow: j.Key.WorkflowExecID,
		AnnotationKillGrace: grace.String()}
	if qt := time.Duration(j.Settings.QueuedTimeout); qt > 0 {
		annotations[AnnotationQueuedTimeout] = qt.String()
	}
	job.Labels = merge(job.Labels, labels)
	job.Annotations = merge(job.Annotations, annotations)
	job.Spec.BackoffLimit = ptr(int32(0))
	ttl := b.TTL
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	job.Spec.TTLSecondsAfterFinished = ptr(int32(ttl.Seconds()))
	pod := &job.Spec.Template
	pod.Labels = merge(pod.Labels, labels)
	pod.Annotations = merge(pod.Annotations, map[string]string{AnnotationActivity: j.Key.ActivityExecID})
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.TerminationGracePeriodSeconds = ptr(int64(math.Ceil((grace + StopMargin).Seconds())))
	if l.ServiceAccount != "" {
		pod.Spec.ServiceAccountName = l.ServiceAccount
	}
	if len(l.NodeSelector) > 0 {
		pod.Spec.NodeSelector = merge(pod.Spec.NodeSelector, l.NodeSelector)
	}
	if len(pod.Spec.Containers) == 0 {
		pod.Spec.Containers = []corev1.Container{{Name: "whimbrel"}}
	}
	c := &pod.Spec.Containers[0]
	if l.Image != "" {
		c.Image = l.Image
	}
	if len(j.Command) > 0 {
		c.Args = j.Command
	}
	// The wrapper's variables replace the template's of the same name.
	var own []corev1.EnvVar
	names := map[string]bool{}
	for _, kv := range j.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		names[k] = true
		own = append(own, corev1.EnvVar{Name: k, Value: v})
	}
	var kept []corev1.EnvVar
	for _, e := range c.Env {
		if !names[e.Name] {
			kept = append(kept, e)
		}
	}
	c.Env = append(kept, own...)
	if r := l.Resources; r != nil {
		if err := setResources(c, r.Requests, r.Limits); err != nil {
			return nil, fmt.Errorf("activity %s: %w", j.ActivityName, err)
		}
	}
	return job, nil
}

func setResources(c *corev1.Container, requests, limits map[string]string) error {
	set := func(into *corev1.ResourceList, from map[string]string, what string) error {
		for name, q := range from {
			v, err := resource.ParseQuantity(q)
			if err != nil {
				return fmt.Errorf("resources.%s.%s %q: %w", what, name, q, err)
			}
			if *into == nil {
				*into = corev1.ResourceList{}
			}
			(*into)[corev1.ResourceName(name)] = v
		}
		return nil
	}
	if err := set(&c.Resources.Requests, requests, "requests"); err != nil {
		return err
	}
	return set(&c.Resources.Limits, limits, "limits")
}

// readTemplate reads a Job manifest, refusing what is not one with the
// file's name and what is wrong.
func readTemplate(path string) (*batchv1.Job, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read job_template: %w (the path is read on the launcher's machine, relative to its working directory)", err)
	}
	var job batchv1.Job
	if err := yaml.UnmarshalStrict(b, &job); err != nil {
		return nil, fmt.Errorf("job_template %s is not a Job manifest: %w", path, err)
	}
	if job.Kind != "Job" || job.APIVersion != "batch/v1" {
		return nil, fmt.Errorf("job_template %s is a %s %q, not a batch/v1 Job", path, job.APIVersion, job.Kind)
	}
	if len(job.Spec.Template.Spec.Containers) == 0 {
		return nil, fmt.Errorf("job_template %s has no containers: its first container runs whimbrel-run", path)
	}
	return &job, nil
}

func merge(into, from map[string]string) map[string]string {
	if into == nil {
		into = map[string]string{}
	}
	for k, v := range from {
		into[k] = v
	}
	return into
}

func ptr[T any](v T) *T { return &v }

// parseDuration reads an annotation written by job; def when absent or
// unreadable (someone edited it).
func parseDuration(s string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d
	}
	return def
}
