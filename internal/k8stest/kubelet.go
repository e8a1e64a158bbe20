package k8stest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// startPod creates the Job's pod and, as a kubelet would, runs its first
// container: the image's entrypoint (or the container's command) and its
// args, with the node's environment and the container's. A pod whose
// image the node cannot pull stays Pending, waiting in ImagePullBackOff.
// Called with s.mu held.
func (s *Server) startPod(job *batchv1.Job) {
	name := job.Name + "-" + s.nextID()
	labels := map[string]string{"job-name": job.Name, "batch.kubernetes.io/job-name": job.Name,
		"controller-uid": string(job.UID), "batch.kubernetes.io/controller-uid": string(job.UID)}
	for k, v := range job.Spec.Template.Labels {
		labels[k] = v
	}
	obj := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: job.Namespace, Labels: labels, UID: types.UID("uid-pod-" + s.nextID()),
			CreationTimestamp: now(), OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID}}},
		Spec:   *job.Spec.Template.Spec.DeepCopy(),
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	p := &pod{obj: obj, done: make(chan struct{})}
	s.pods[job.Namespace+"/"+name] = p
	c := obj.Spec.Containers[0]
	s.event(obj, corev1.EventTypeNormal, "Scheduled", fmt.Sprintf("Successfully assigned %s/%s to fake-node", obj.Namespace, name))
	entry, ok := s.Images[c.Image]
	if !ok {
		msg := fmt.Sprintf("Back-off pulling image %q", c.Image)
		obj.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: c.Name, Image: c.Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: msg}}}}
		s.event(obj, corev1.EventTypeWarning, "Failed", fmt.Sprintf("Failed to pull image %q: rpc error: code = NotFound desc = failed to pull and unpack image %q: not found", c.Image, c.Image))
		s.event(obj, corev1.EventTypeWarning, "Failed", "Error: ImagePullBackOff")
		close(p.done)
		return
	}
	argv := append(append([]string(nil), entry...), c.Args...)
	if len(c.Command) > 0 {
		argv = append(append([]string(nil), c.Command...), c.Args...)
	}
	env := append([]string(nil), s.NodeEnv...)
	for _, e := range c.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	env = append(env, "HOSTNAME="+name)
	out, err := os.Create(filepath.Join(s.Dir, name+".log"))
	if err != nil {
		s.terminate(p, job, 128, "StartError", err.Error())
		close(p.done)
		return
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		out.Close()
		s.terminate(p, job, 128, "StartError", err.Error())
		close(p.done)
		return
	}
	p.proc = cmd.Process
	obj.Status.Phase = corev1.PodRunning
	obj.Status.StartTime = ptr(now())
	obj.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: c.Name, Image: c.Image, Ready: true, Started: ptr(true),
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now()}}}}
	s.event(obj, corev1.EventTypeNormal, "Started", "Started container "+c.Name)
	s.procs.Add(1)
	go func() {
		defer s.procs.Done()
		err := cmd.Wait()
		out.Close()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
			if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
		}
		s.mu.Lock()
		reason := "Completed"
		if code != 0 {
			reason = "Error"
		}
		s.terminate(p, job, code, reason, "")
		s.mu.Unlock()
		close(p.done)
	}()
}

// terminate records that the pod's container ended, and the Job with it
// (backoffLimit 0 is all this stand-in knows). Called with s.mu held.
func (s *Server) terminate(p *pod, job *batchv1.Job, code int, reason, msg string) {
	p.obj.Status.Phase = corev1.PodSucceeded
	if code != 0 {
		p.obj.Status.Phase = corev1.PodFailed
	}
	cs := &p.obj.Status.ContainerStatuses
	if len(*cs) == 0 {
		*cs = []corev1.ContainerStatus{{Name: p.obj.Spec.Containers[0].Name, Image: p.obj.Spec.Containers[0].Image}}
	}
	(*cs)[0].Ready = false
	(*cs)[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(code), Reason: reason, Message: msg, FinishedAt: now()}}
	job.Status.Active = 0
	cond := batchv1.JobComplete
	if code != 0 {
		cond = batchv1.JobFailed
		job.Status.Failed = 1
	} else {
		job.Status.Succeeded = 1
		job.Status.CompletionTime = ptr(now())
	}
	job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{Type: cond, Status: corev1.ConditionTrue, LastTransitionTime: now(), Reason: reason})
}

// deletePods stops the Job's pods as a kubelet does: SIGTERM, then
// SIGKILL after the pod's termination grace period; once they are gone
// the pods, and the Job, are removed. Called with s.mu held.
func (s *Server) deletePods(job *batchv1.Job) {
	var ps []*pod
	for _, p := range s.pods {
		if p.obj.Namespace == job.Namespace && p.obj.Labels["job-name"] == job.Name {
			ps = append(ps, p)
			p.obj.DeletionTimestamp = ptr(now())
			if p.proc != nil {
				_ = syscall.Kill(-p.proc.Pid, syscall.SIGTERM)
			}
			s.event(p.obj, corev1.EventTypeNormal, "Killing", "Stopping container "+p.obj.Spec.Containers[0].Name)
		}
	}
	s.procs.Add(1)
	go func() {
		defer s.procs.Done()
		for _, p := range ps {
			grace := int64(30)
			if g := p.obj.Spec.TerminationGracePeriodSeconds; g != nil {
				grace = *g
			}
			select {
			case <-p.done:
			case <-time.After(time.Duration(grace) * time.Second):
				if p.proc != nil {
					_ = syscall.Kill(-p.proc.Pid, syscall.SIGKILL)
				}
				<-p.done
			}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, p := range ps {
			delete(s.pods, p.obj.Namespace+"/"+p.obj.Name)
		}
		delete(s.jobs, job.Namespace+"/"+job.Name)
	}()
}

// event records an event on the pod. Called with s.mu held.
func (s *Server) event(p *corev1.Pod, typ, reason, msg string) {
	t := now()
	s.events = append(s.events, corev1.Event{
		TypeMeta:   metav1.TypeMeta{Kind: "Event", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%s", p.Name, s.nextID()), Namespace: p.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID,
			APIVersion: "v1"},
		Type: typ, Reason: reason, Message: msg, FirstTimestamp: t, LastTimestamp: t, Count: 1,
		Source: corev1.EventSource{Component: "kubelet", Host: "fake-node"},
	})
}

// stopAll kills every pod's process and waits for them.
func (s *Server) stopAll() {
	s.mu.Lock()
	for _, p := range s.pods {
		if p.proc != nil {
			_ = syscall.Kill(-p.proc.Pid, syscall.SIGKILL)
		}
	}
	s.mu.Unlock()
	s.procs.Wait()
}
