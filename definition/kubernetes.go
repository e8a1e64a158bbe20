package definition

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Kubernetes is what a launch of type kubernetes says of the Job the
// launcher creates for each attempt. The image's entrypoint is
// whimbrel-run, as for docker.
type Kubernetes struct {
	// Namespace of the Job (empty: the launcher's --k8s-namespace).
	Namespace string `yaml:"namespace,omitempty" json:"namespace,omitempty"`
	// ServiceAccount the pod runs as (empty: the namespace's default).
	ServiceAccount string `yaml:"service_account,omitempty" json:"service_account,omitempty"`
	// Resources are the container's requests and limits, as Kubernetes
	// writes quantities ("2", "500m", "4Gi").
	Resources *Resources `yaml:"resources,omitempty" json:"resources,omitempty"`
	// NodeSelector constrains the nodes the pod may run on.
	NodeSelector map[string]string `yaml:"node_selector,omitempty" json:"node_selector,omitempty"`
	// JobTemplate is the path, on the launcher's machine, of a whole
	// batch/v1 Job manifest to start from; its first container runs
	// whimbrel-run and gets the wrapper's environment.
	JobTemplate string `yaml:"job_template,omitempty" json:"job_template,omitempty"`
}

// Resources are a container's resource requests and limits by resource
// name (cpu, memory, nvidia.com/gpu, …).
type Resources struct {
	Requests map[string]string `yaml:"requests,omitempty" json:"requests,omitempty"`
	Limits   map[string]string `yaml:"limits,omitempty" json:"limits,omitempty"`
}

var (
	// dnsLabel is a DNS-1123 label: what Kubernetes accepts as a
	// namespace.
	dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	// dnsSubdomain is a DNS-1123 subdomain: what Kubernetes accepts as a
	// service account's name.
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	// quantity is Kubernetes's resource quantity: a number with an
	// optional binary (Ki…Ei), decimal (n, u, m, k, M…E) or exponent
	// suffix.
	quantity = regexp.MustCompile(`^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$`)
	// labelKey is a label key: an optional DNS-subdomain prefix and a
	// name of at most 63 characters.
	labelName  = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$`)
	resourceKs = []string{"requests", "limits"}
)

// checkKubernetes checks a launch of type kubernetes: what the API server
// would refuse is refused when the definition is read, with the field.
func (l *Launch) checkKubernetes() []string {
	var errs []string
	if l.Image == "" && l.JobTemplate == "" {
		errs = append(errs, "launch type kubernetes needs an image (whose entrypoint is whimbrel-run) or a job_template")
	}
	if len(l.DockerArgs) > 0 || l.TaskDefinition != "" || l.Cluster != "" || l.Container != "" {
		errs = append(errs, "launch type kubernetes takes no docker_args, cluster, task_definition or container: put such settings in a job_template")
	}
	if l.Namespace != "" && !dnsLabel.MatchString(l.Namespace) {
		errs = append(errs, fmt.Sprintf("namespace %q is not a Kubernetes namespace name: lower-case letters, digits and '-', at most 63", l.Namespace))
	}
	if l.ServiceAccount != "" && (len(l.ServiceAccount) > 253 || !dnsSubdomain.MatchString(l.ServiceAccount)) {
		errs = append(errs, fmt.Sprintf("service_account %q is not a Kubernetes name: lower-case letters, digits, '-' and '.'", l.ServiceAccount))
	}
	if r := l.Resources; r != nil {
		for _, kind := range []struct {
			name string
			m    map[string]string
		}{{"requests", r.Requests}, {"limits", r.Limits}} {
			for _, k := range sortedKeys(kind.m) {
				if !quantity.MatchString(kind.m[k]) {
					errs = append(errs, fmt.Sprintf("resources.%s.%s %q is not a Kubernetes quantity such as 2, 500m or 4Gi", kind.name, k, kind.m[k]))
				}
			}
		}
	}
	for _, k := range sortedKeys(l.NodeSelector) {
		if !labelKeyOK(k) || len(l.NodeSelector[k]) > 63 || !labelName.MatchString(l.NodeSelector[k]) {
			errs = append(errs, fmt.Sprintf("node_selector %q: %q is not a Kubernetes label (letters, digits, '-', '_', '.', at most 63)", k, l.NodeSelector[k]))
		}
	}
	if t := l.JobTemplate; t != "" && !slices.ContainsFunc([]string{".yaml", ".yml", ".json"}, func(ext string) bool { return strings.HasSuffix(t, ext) }) {
		errs = append(errs, fmt.Sprintf("job_template %q is not a .yaml, .yml or .json file: name the Job manifest the launcher reads", t))
	}
	return errs
}

// labelKeyOK tells a label key: [prefix/]name.
func labelKeyOK(k string) bool {
	prefix, name, found := strings.Cut(k, "/")
	if !found {
		name, prefix = prefix, ""
	}
	if found && (len(prefix) > 253 || !dnsSubdomain.MatchString(prefix)) {
		return false
	}
	return name != "" && len(name) <= 63 && labelName.MatchString(name)
}

// checkKubernetesValue checks the shape of resources and node_selector
// where the YAML still knows its lines.
func checkKubernetesValue(p *problems, key string, v *yaml.Node, where string) {
	textMap := func(m *yaml.Node, what string) {
		if m.Kind != yaml.MappingNode {
			p.add(m.Line, "%s: %s must be a mapping of name: value", where, what)
			return
		}
		for i := 0; i+1 < len(m.Content); i += 2 {
			if val := resolve(m.Content[i+1]); val.Kind != yaml.ScalarNode || val.Tag == "!!null" {
				p.add(val.Line, "%s: %s %s must be text", where, what, m.Content[i].Value)
			}
		}
	}
	if key == "node_selector" {
		textMap(v, key)
		return
	}
	if v.Kind != yaml.MappingNode {
		p.add(v.Line, "%s: resources must be a mapping {requests: {cpu: \"2\"}, limits: {memory: 4Gi}}", where)
		return
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k := v.Content[i]
		if !slices.Contains(resourceKs, k.Value) {
			p.add(k.Line, "%s: resources: unknown field %q (known: requests, limits)", where, k.Value)
			continue
		}
		textMap(resolve(v.Content[i+1]), "resources."+k.Value)
	}
}
