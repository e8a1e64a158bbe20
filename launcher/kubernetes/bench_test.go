package kubernetes_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/launcher/kubernetes"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/workflow"
)

// BenchmarkKubernetesLaunches measures launches per second with the
// Kubernetes backend against the stand-in API server, on DynamoDB
// Local: 200 ready activities, each one Job create, launched by 1 or 4
// launchers with their default workers. The image is one the stand-in's
// node cannot pull, so no pod runs: what is measured is the claim, the
// create and the record.
func BenchmarkKubernetesLaunches(b *testing.B) {
	for _, launchers := range []int{1, 4} {
		b.Run(fmt.Sprintf("launchers=%d", launchers), func(b *testing.B) {
			const activities = 200
			srv := newServer(b, nil)
			st := dynamotest.NewStore(b, dynamodb.Options{})
			var y strings.Builder
			y.WriteString("name: bench\ndefaults: {launch: {type: kubernetes, image: registry.example.com/absent:1}}\nactivities:\n")
			for i := 0; i < activities; i++ {
				fmt.Fprintf(&y, "  a%03d: {command: [\"true\"]}\n", i)
			}
			d, err := definition.Parse("bench.yaml", []byte(y.String()))
			if err != nil {
				b.Fatal(err)
			}
			var took time.Duration
			for i := 0; i < b.N; i++ {
				if _, _, err := workflow.Start(context.Background(), st, d, workflow.StartOptions{}); err != nil {
					b.Fatal(err)
				}
				began := time.Now()
				var total atomic.Int64
				var wg sync.WaitGroup
				for j := 0; j < launchers; j++ {
					kb, err := kubernetes.NewBackend(&rest.Config{Host: srv.URL, QPS: 1000, Burst: 1000}, "batch")
					if err != nil {
						b.Fatal(err)
					}
					l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{definition.LaunchKubernetes: kb}})
					wg.Go(func() {
						for idle := 0; idle < 2 && total.Load() < activities; {
							n, err := l.Once(context.Background())
							if err != nil {
								b.Error(err)
								return
							}
							total.Add(int64(n))
							if n == 0 {
								idle++
							}
						}
					})
				}
				wg.Wait()
				took += time.Since(began)
				if total.Load() != activities {
					b.Fatalf("launched %d, want %d", total.Load(), activities)
				}
			}
			b.ReportMetric(float64(activities*b.N)/took.Seconds(), "launches/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
