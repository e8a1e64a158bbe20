package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/hashicorp/go-hclog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchv1client "k8s.io/client-go/kubernetes/typed/batch/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// inClusterNamespace is where a pod finds its own namespace.
const inClusterNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Connect builds the backend of a launcher process. With kubeconfig (or
// KUBECONFIG) it uses that file's current context; without either it
// uses the in-cluster configuration of the pod it runs in. namespace is
// that of activities whose definition names none; empty: the context's
// namespace, else the pod's own, else "default". It checks, within ctx,
// that the API server answers and lets it list Jobs there, since a
// launcher that cannot launch would fail every activity it claims.
func Connect(ctx context.Context, kubeconfig, namespace string, log hclog.Logger) (*Backend, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig == "" && os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" {
		if cfg, err = rest.InClusterConfig(); err != nil {
			return nil, fmt.Errorf("no Kubernetes configuration: run the launcher in a cluster (with a service account), or give --kubeconfig (or KUBECONFIG): %w", err)
		}
		if namespace == "" {
			if b, err := os.ReadFile(inClusterNamespace); err == nil {
				namespace = strings.TrimSpace(string(b))
			}
		}
	} else {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = kubeconfig
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
		if cfg, err = cc.ClientConfig(); err != nil {
			return nil, fmt.Errorf("read the Kubernetes configuration %s: %w", orEnv(kubeconfig), err)
		}
		if namespace == "" {
			if ns, _, err := cc.Namespace(); err == nil {
				namespace = ns
			}
		}
	}
	if namespace == "" {
		namespace = "default"
	}
	cfg.UserAgent = "whimbrel-launcher"
	// The launcher spaces its own retries; client-go's rate limiter only
	// has to keep a burst of launches from flooding the API server.
	cfg.QPS, cfg.Burst = 20, 40
	b, err := NewBackend(cfg, namespace)
	if err != nil {
		return nil, err
	}
	b.Logger = log
	_, err = b.Batch.Jobs(namespace).List(ctx, metav1.ListOptions{Limit: 1, LabelSelector: LabelManagedBy + "=" + ManagedBy})
	switch {
	case apierrors.IsForbidden(err):
		return nil, fmt.Errorf("the launcher may not list Jobs in namespace %s: bind it the Role of examples/kubernetes/rbac.yaml (%w)", namespace, err)
	case err != nil:
		return nil, fmt.Errorf("cannot reach the Kubernetes API server %s to list Jobs in namespace %s: %w", cfg.Host, namespace, err)
	}
	return b, nil
}

// NewBackend returns a backend talking to the API server of cfg.
func NewBackend(cfg *rest.Config, namespace string) (*Backend, error) {
	// JSON, which every API server and proxy in front of one speaks; the
	// launcher's few calls gain nothing from protobuf.
	cfg = rest.CopyConfig(cfg)
	if cfg.ContentType == "" {
		cfg.ContentType = "application/json"
	}
	if cfg.AcceptContentTypes == "" {
		cfg.AcceptContentTypes = "application/json"
	}
	batch, err := batchv1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("build the Kubernetes batch client: %w", err)
	}
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("build the Kubernetes core client: %w", err)
	}
	if namespace == "" {
		return nil, errors.New("a Kubernetes backend needs a namespace")
	}
	return &Backend{Batch: batch, Core: core, Namespace: namespace}, nil
}

func orEnv(path string) string {
	if path != "" {
		return path
	}
	return "$" + clientcmd.RecommendedConfigPathEnvVar
}
