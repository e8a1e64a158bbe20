// Package k8stest is a stand-in for a Kubernetes API server, for tests of
// what talks to one with the real client over HTTP: it speaks the API's
// JSON with the official types and status codes for the Jobs, pods and
// events a launcher uses, records every request, and, as a kubelet
// would, runs the first container of each Job it creates as a local
// process with the container's environment. It answers AlreadyExists for
// a Job name taken, Forbidden ("exceeded quota") when told to, and leaves
// the pod of an image it does not know waiting in ImagePullBackOff, with
// the events a kubelet writes.
package k8stest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Request is one request the server answered.
type Request struct {
	// Verb is the RBAC verb: create, get, list, delete, …
	Verb string
	// Group is the API group ("" for the core group), Resource the
	// resource (jobs, pods, events).
	Group, Resource string
	Namespace, Name string
	Query           string
	Body            []byte
	Code            int // the status code answered
}

// Server is the stand-in API server. Images maps each image the "node"
// can pull to its entrypoint (the argv the container runs before its
// args); NodeEnv is added to every container's environment before its
// own, as a node's image would bake it in.
type Server struct {
	URL     string
	Images  map[string][]string
	NodeEnv []string
	// Dir holds each pod's output, as NAME.log.
	Dir string

	mu       sync.Mutex
	requests []Request
	jobs     map[string]*batchv1.Job // namespace/name
	pods     map[string]*pod         // namespace/name
	events   []corev1.Event
	quota    int // creates still to answer Forbidden
	hang     int // creates still to carry out and then leave unanswered
	serial   int
	procs    sync.WaitGroup
}

type pod struct {
	obj  *corev1.Pod
	proc *os.Process
	done chan struct{} // closed when its process has exited
}

// New starts a server that stops when the test ends, killing the
// processes of the pods still running.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{Images: map[string][]string{}, Dir: t.TempDir(), jobs: map[string]*batchv1.Job{}, pods: map[string]*pod{}}
	ts := httptest.NewServer(s)
	s.URL = ts.URL
	t.Cleanup(func() {
		ts.Close()
		s.stopAll()
	})
	return s
}

// Kubeconfig writes a kubeconfig for the server into dir, with namespace
// as its context's namespace, and returns its path.
func (s *Server) Kubeconfig(t testing.TB, namespace string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster: {server: %q}
users:
- name: launcher
  user: {token: fake-token}
contexts:
- name: fake
  context: {cluster: fake, user: launcher, namespace: %s}
current-context: fake
`, s.URL, namespace)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Quota makes the next n creates of a Job fail with Forbidden, as when
// the namespace's ResourceQuota is used up.
func (s *Server) Quota(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.quota = n
}

// Hang makes the next n creates of a Job create it and then answer
// nothing until the client gives up or goes away: a launcher killed, or
// cut off, after its Job was created.
func (s *Server) Hang(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hang = n
}

// Requests returns the requests answered so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Jobs returns copies of the Jobs that exist now.
func (s *Server) Jobs() []*batchv1.Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*batchv1.Job
	for _, j := range s.jobs {
		out = append(out, j.DeepCopy())
	}
	return out
}

// Log returns what the pods of the Job named name wrote.
func (s *Server) Log(name string) string {
	matches, _ := filepath.Glob(filepath.Join(s.Dir, name+"-*.log"))
	var b strings.Builder
	for _, m := range matches {
		data, _ := os.ReadFile(m)
		b.Write(data)
	}
	return b.String()
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req, ok := route(r)
	req.Body = body
	code := http.StatusNotFound
	var out any
	if ok {
		var hang bool
		code, out, hang = s.serve(req, r)
		if hang {
			<-r.Context().Done()
			req.Code = 0
			s.mu.Lock()
			s.requests = append(s.requests, req)
			s.mu.Unlock()
			return
		}
	} else {
		out = status(code, metav1.StatusReasonNotFound, "the server could not find the requested resource", "", "")
	}
	req.Code = code
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(out)
}

// route reads the verb, resource, namespace and name of a request.
func route(r *http.Request) (Request, bool) {
	req := Request{Query: r.URL.RawQuery}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 6 && parts[0] == "apis" && parts[3] == "namespaces":
		req.Group, req.Namespace, parts = parts[1], parts[4], parts[5:]
	case len(parts) >= 5 && parts[0] == "api" && parts[2] == "namespaces":
		req.Namespace, parts = parts[3], parts[4:]
	default:
		return req, false
	}
	if len(parts) == 0 {
		return req, false
	}
	req.Resource = parts[0]
	if len(parts) > 1 {
		req.Name = parts[1]
	}
	switch {
	case r.Method == http.MethodPost:
		req.Verb = "create"
	case r.Method == http.MethodGet && req.Name == "" && r.URL.Query().Get("watch") == "true":
		req.Verb = "watch"
	case r.Method == http.MethodGet && req.Name == "":
		req.Verb = "list"
	case r.Method == http.MethodGet:
		req.Verb = "get"
	case r.Method == http.MethodDelete:
		req.Verb = "delete"
	case r.Method == http.MethodPatch:
		req.Verb = "patch"
	case r.Method == http.MethodPut:
		req.Verb = "update"
	default:
		return req, false
	}
	return req, true
}

// status is the API's Status object for an error.
func status(code int, reason metav1.StatusReason, msg, kind, name string) *metav1.Status {
	st := &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Message: msg, Reason: reason, Code: int32(code)}
	if kind != "" {
		st.Details = &metav1.StatusDetails{Name: name, Group: "batch", Kind: kind}
	}
	return st
}

func (s *Server) serve(req Request, r *http.Request) (code int, out any, hang bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case req.Group == "batch" && req.Resource == "jobs":
		code, out = s.serveJobs(req, r)
		if req.Verb == "create" && code == http.StatusCreated && s.hang > 0 {
			s.hang--
			return code, out, true
		}
		return code, out, false
	case req.Group == "" && req.Resource == "pods" && req.Verb == "list":
		list := &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
		sel := r.URL.Query().Get("labelSelector")
		for _, p := range s.pods {
			if p.obj.Namespace == req.Namespace && matches(p.obj.Labels, sel) {
				list.Items = append(list.Items, *p.obj.DeepCopy())
			}
		}
		return http.StatusOK, list, false
	case req.Group == "" && req.Resource == "events" && req.Verb == "list":
		list := &corev1.EventList{TypeMeta: metav1.TypeMeta{Kind: "EventList", APIVersion: "v1"}}
		name, _ := strings.CutPrefix(r.URL.Query().Get("fieldSelector"), "involvedObject.name=")
		for _, e := range s.events {
			if e.Namespace == req.Namespace && (name == "" || e.InvolvedObject.Name == name) {
				list.Items = append(list.Items, e)
			}
		}
		return http.StatusOK, list, false
	}
	return http.StatusMethodNotAllowed, status(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
		fmt.Sprintf("the stand-in does not serve %s %s", req.Verb, req.Resource), "", ""), false
}

// matches tells whether labels satisfy a selector of k=v terms.
func matches(labels map[string]string, sel string) bool {
	if sel == "" {
		return true
	}
	for _, term := range strings.Split(sel, ",") {
		k, v, _ := strings.Cut(term, "=")
		if labels[k] != v {
			return false
		}
	}
	return true
}

func (s *Server) nextID() string {
	s.serial++
	return fmt.Sprintf("%05d", s.serial)
}

func now() metav1.Time { return metav1.NewTime(time.Now().Truncate(time.Second)) }

func (s *Server) serveJobs(req Request, r *http.Request) (int, any) {
	key := req.Namespace + "/" + req.Name
	switch req.Verb {
	case "create":
		var job batchv1.Job
		if err := json.Unmarshal(req.Body, &job); err != nil {
			return http.StatusBadRequest, status(http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error(), "", "")
		}
		if job.Namespace == "" {
			job.Namespace = req.Namespace
		}
		if msg := invalid(&job, req.Namespace); msg != "" {
			return http.StatusUnprocessableEntity, status(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
				fmt.Sprintf("Job.batch %q is invalid: %s", job.Name, msg), "jobs", job.Name)
		}
		key = job.Namespace + "/" + job.Name
		if _, ok := s.jobs[key]; ok {
			return http.StatusConflict, status(http.StatusConflict, metav1.StatusReasonAlreadyExists,
				fmt.Sprintf("jobs.batch %q already exists", job.Name), "jobs", job.Name)
		}
		if s.quota > 0 {
			s.quota--
			return http.StatusForbidden, status(http.StatusForbidden, metav1.StatusReasonForbidden,
				fmt.Sprintf("jobs.batch %q is forbidden: exceeded quota: batch-quota, requested: count/jobs.batch=1, used: count/jobs.batch=20, limited: count/jobs.batch=20", job.Name), "jobs", job.Name)
		}
		job.UID = types.UID("uid-" + s.nextID())
		job.ResourceVersion = s.nextID()
		job.CreationTimestamp = now()
		job.Status = batchv1.JobStatus{StartTime: ptr(now()), Active: 1}
		s.jobs[key] = &job
		s.startPod(&job)
		return http.StatusCreated, job.DeepCopy()
	case "get":
		job, ok := s.jobs[key]
		if !ok {
			return http.StatusNotFound, status(http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("jobs.batch %q not found", req.Name), "jobs", req.Name)
		}
		return http.StatusOK, job.DeepCopy()
	case "list":
		list := &batchv1.JobList{TypeMeta: metav1.TypeMeta{Kind: "JobList", APIVersion: "batch/v1"}}
		list.ResourceVersion = s.nextID()
		sel := r.URL.Query().Get("labelSelector")
		for _, j := range s.jobs {
			if j.Namespace == req.Namespace && matches(j.Labels, sel) {
				list.Items = append(list.Items, *j.DeepCopy())
			}
		}
		return http.StatusOK, list
	case "delete":
		job, ok := s.jobs[key]
		if !ok {
			return http.StatusNotFound, status(http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("jobs.batch %q not found", req.Name), "jobs", req.Name)
		}
		var opts metav1.DeleteOptions
		_ = json.Unmarshal(req.Body, &opts)
		if job.DeletionTimestamp == nil {
			job.DeletionTimestamp = ptr(now())
			if opts.PropagationPolicy != nil && *opts.PropagationPolicy == metav1.DeletePropagationForeground {
				// The Job stays, marked, until its pods are gone.
				job.Finalizers = append(job.Finalizers, metav1.FinalizerDeleteDependents)
			}
			s.deletePods(job)
		}
		return http.StatusOK, job.DeepCopy()
	}
	return http.StatusMethodNotAllowed, status(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, "the stand-in does not "+req.Verb+" jobs", "", "")
}

// invalid says what the API server would refuse in a Job, or "".
func invalid(job *batchv1.Job, ns string) string {
	var errs []string
	if n := job.Name; n == "" || len(n) > 63 || strings.Trim(n, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" || n[0] == '-' || n[len(n)-1] == '-' {
		errs = append(errs, fmt.Sprintf("metadata.name: Invalid value: %q: must be no more than 63 characters and a DNS-1123 label", n))
	}
	if job.Namespace != ns {
		errs = append(errs, "metadata.namespace: Invalid value: the namespace of the object does not match the namespace on the request")
	}
	spec := job.Spec.Template.Spec
	if len(spec.Containers) == 0 {
		errs = append(errs, "spec.template.spec.containers: Required value")
	}
	for i, c := range spec.Containers {
		if c.Image == "" {
			errs = append(errs, fmt.Sprintf("spec.template.spec.containers[%d].image: Required value", i))
		}
	}
	if p := spec.RestartPolicy; p != corev1.RestartPolicyNever && p != corev1.RestartPolicyOnFailure {
		errs = append(errs, fmt.Sprintf("spec.template.spec.restartPolicy: Unsupported value: %q: supported values: \"OnFailure\", \"Never\"", p))
	}
	return strings.Join(errs, ", ")
}

func ptr[T any](v T) *T { return &v }
