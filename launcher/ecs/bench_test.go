package ecs_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/launcher/ecs"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/workflow"
)

// BenchmarkECSLaunches measures launches per second with the ECS backend
// against a fake ECS endpoint that answers each RunTask after 50 ms, on
// DynamoDB Local: 200 ready activities, launched by 1 or 4 launchers with
// their default workers, and by 1 launcher with 1 worker (one launch at a
// time, as before the worker pool).
func BenchmarkECSLaunches(b *testing.B) {
	for _, tc := range []struct {
		name               string
		launchers, workers int
	}{
		{"launchers=1/workers=1", 1, 1},
		{"launchers=1", 1, 0},
		{"launchers=4", 4, 0},
	} {
		b.Run(tc.name, func(b *testing.B) {
			const activities = 200
			fake, client := newFakeECS(b)
			fake.Latency = 50 * time.Millisecond
			st := dynamotest.NewStore(b, dynamodb.Options{})
			tds := map[string]string{}
			for i := 0; i < activities; i++ {
				tds[fmt.Sprintf("a%03d", i)] = "ok"
			}
			d, err := definition.Parse("bench.yaml", []byte(ecsActivities("bench", tds, "")))
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
				for j := 0; j < tc.launchers; j++ {
					l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{definition.LaunchECS: &ecs.Backend{API: client}},
						Workers: tc.workers})
					wg.Add(1)
					go func() {
						defer wg.Done()
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
					}()
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
