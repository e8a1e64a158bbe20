package definition_test

import (
	"strings"
	"testing"

	"github.com/whimbrel/whimbrel/definition"
)

func TestParseKubernetes(t *testing.T) {
	d, err := definition.Parse("w.yaml", []byte(`name: w
activities:
  train:
    command: [python, train.py]
    launch:
      type: kubernetes
      namespace: batch
      image: registry.example.com/train:1.4
      service_account: trainer
      resources: {requests: {cpu: "2", memory: 4Gi}, limits: {memory: 4Gi, nvidia.com/gpu: 1}}
      node_selector: {pool: gpu, kubernetes.io/arch: amd64}
  templated:
    launch: {type: kubernetes, job_template: k8s/train-job.yaml}
`))
	if err != nil {
		t.Fatal(err)
	}
	l := d.Effective("train").Launch
	if l.Type != definition.LaunchKubernetes || l.Namespace != "batch" || l.ServiceAccount != "trainer" || l.Resources.Requests["memory"] != "4Gi" ||
		l.Resources.Limits["nvidia.com/gpu"] != "1" || l.NodeSelector["pool"] != "gpu" {
		t.Errorf("launch: %+v", l)
	}
	if l := d.Effective("templated").Launch; l.JobTemplate != "k8s/train-job.yaml" {
		t.Errorf("templated: %+v", l)
	}
}

func TestParseKubernetesErrors(t *testing.T) {
	for _, tc := range []struct{ name, launch, want string }{
		{"no image", "{type: kubernetes}", `w.yaml:3: activity "a": launch type kubernetes needs an image`},
		{"bad namespace", "{type: kubernetes, image: i, namespace: Batch_1}", `namespace "Batch_1" is not a Kubernetes namespace name`},
		{"bad service account", "{type: kubernetes, image: i, service_account: \"<script>\"}", `service_account "<script>" is not a Kubernetes name`},
		{"bad quantity", "{type: kubernetes, image: i, resources: {requests: {cpu: two}}}", `resources.requests.cpu "two" is not a Kubernetes quantity`},
		{"unknown resources field", "\n      type: kubernetes\n      image: i\n      resources: {request: {cpu: 1}}", `w.yaml:8: activity "a": launch: resources: unknown field "request"`},
		{"resources not a mapping", "{type: kubernetes, image: i, resources: [cpu]}", `resources must be a mapping`},
		{"node selector not text", "{type: kubernetes, image: i, node_selector: {pool: [a]}}", `node_selector pool must be text`},
		{"bad node selector", "{type: kubernetes, image: i, node_selector: {pool: \"a b\"}}", `node_selector "pool": "a b" is not a Kubernetes label`},
		{"ecs fields", "{type: kubernetes, image: i, task_definition: t}", `launch type kubernetes takes no docker_args, cluster, task_definition or container`},
		{"template not a manifest", "{type: kubernetes, job_template: job.txt}", `job_template "job.txt" is not a .yaml, .yml or .json file`},
		{"typo", "{type: kubernetes, image: i, namespce: b}", `unknown field "namespce" (did you mean "namespace"?)`},
	} {
		_, err := definition.Parse("w.yaml", []byte("name: w\nactivities:\n  a:\n    command: [\"true\"]\n    launch: "+tc.launch+"\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
