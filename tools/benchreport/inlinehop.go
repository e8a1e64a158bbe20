package main

// Inline supervision, build beside build, with the DynamoDB calls counted:
// the engine's figures with `--supervise inline` on both stores, the
// binaries of -before and of -bin alternating, and on DynamoDB Local the
// calls the launcher and monitor made (through a counting proxy), per
// activity of the ready fan-out and per hop of the chain.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/whimbrel/whimbrel/state/dynamodb"
)

var onlyInlineHop = flag.Bool("inline-hop", false, "measure the engine with local activities supervised inline only, on both stores, with the binaries of -bin and, if given, of -before side by side, counting the DynamoDB calls per activity and per hop, and print its section")

// callCounter is a reverse proxy to DynamoDB Local that counts the calls
// it forwards, by operation (and index, for a query).
type callCounter struct {
	url    string
	srv    *http.Server
	mu     sync.Mutex
	counts map[string]int
}

// proxyTo is a reverse proxy to endpoint and a loopback listener for it
// on a free port.
func proxyTo(endpoint string) (*httputil.ReverseProxy, net.Listener, error) {
	target, err := url.Parse(endpoint)
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	return httputil.NewSingleHostReverseProxy(target), ln, nil
}

func newCallCounter(endpoint string) (*callCounter, error) {
	rp, ln, err := proxyTo(endpoint)
	if err != nil {
		return nil, err
	}
	c := &callCounter{url: "http://" + ln.Addr().String(), counts: map[string]int{}}
	c.srv = &http.Server{ReadHeaderTimeout: time.Minute, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := r.Header.Get("X-Amz-Target")
		op := t[strings.LastIndex(t, ".")+1:]
		if op == "Query" {
			body, err := io.ReadAll(r.Body)
			if err == nil {
				var q struct{ IndexName string }
				if json.Unmarshal(body, &q) == nil && q.IndexName != "" {
					op += " " + q.IndexName
				}
			}
			r.Body = io.NopCloser(strings.NewReader(string(body)))
			r.ContentLength = int64(len(body))
		}
		c.mu.Lock()
		c.counts[op]++
		c.mu.Unlock()
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = c.srv.Serve(ln) }()
	return c, nil
}

// take returns the counts since the last take.
func (c *callCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	got := c.counts
	c.counts = map[string]int{}
	return got
}

func (c *callCounter) close() { _ = c.srv.Close() }

func total(m map[string]int) (n int) {
	for _, v := range m {
		n += v
	}
	return n
}

// hopRun is one build's figures with inline supervision on one store.
type hopRun struct {
	engineRun
	fanCalls, hopCalls map[string]int // DynamoDB calls in the fan-out and in the chain
}

// measureInlineHop is measureEngine with --supervise inline, the
// launcher's and monitor's DynamoDB calls going through cc (nil: the
// embedded store).
func measureInlineHop(ctx context.Context, bin, kind, endpoint string, cc *callCounter, n int) (hopRun, error) {
	var res hopRun
	var es *engineStore
	if kind == "dynamodb" {
		prefix := "hop_" + uuid.NewString()[:8] + "_"
		st := dynamodb.New(client(endpoint), dynamodb.Options{Prefix: prefix})
		if _, err := st.Install(ctx, false); err != nil {
			return res, err
		}
		es = &engineStore{env: storeEnv(prefix, cc.url), st: st, close: func() {}}
	} else {
		var err error
		if es, err = newEngineStore(ctx, kind, endpoint); err != nil {
			return res, err
		}
	}
	defer es.close()
	logs, err := os.MkdirTemp("", "engine-logs")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(logs)
	d, err := trueActivities("trivial", "t%04d", n)
	if err != nil {
		return res, err
	}
	if cc != nil {
		cc.take()
	}
	l, err := startProc(bin, "whimbrel-launcher", es, "--log-dir", logs)
	if err != nil {
		return res, err
	}
	m, err := startProc(bin, "whimbrel-monitor", es)
	if err != nil {
		stopProc(l)
		return res, err
	}
	began := time.Now()
	err = runWorkflow(ctx, es, d)
	took := time.Since(began)
	lc, lown := stopProc(l)
	mc, _ := stopProc(m)
	if err != nil {
		return res, err
	}
	res.perSecond = float64(n) / took.Seconds()
	res.cpu, res.launcher, res.monitor = (lc+mc)/time.Duration(n), lown/time.Duration(n), mc/time.Duration(n)
	if cc != nil {
		res.fanCalls = cc.take()
	}
	res.hops, err = measureHops(ctx, bin, es, logs)
	if cc != nil {
		res.hopCalls = cc.take()
	}
	sort.Slice(res.hops, func(i, j int) bool { return res.hops[i] < res.hops[j] })
	return res, err
}

// printInlineHop measures the builds of before (if given) and bin with
// inline supervision on both stores, alternating, engineRounds times,
// and prints the section.
func printInlineHop(ctx context.Context, w io.Writer, bin, before, endpoint string, n int) error {
	defer func() { supervise = "" }()
	supervise = "inline"
	builds := []string{bin}
	if before != "" {
		builds = []string{before, bin}
	}
	cc, err := newCallCounter(endpoint)
	if err != nil {
		return err
	}
	defer cc.close()
	load0 := loadAverage()
	got := map[string]map[string][]hopRun{}
	for _, kind := range []string{"sqlite", "dynamodb"} {
		got[kind] = map[string][]hopRun{}
		for round := 0; round < engineRounds; round++ {
			for _, b := range builds {
				var c *callCounter
				if kind == "dynamodb" {
					c = cc
				}
				r, err := measureInlineHop(ctx, b, kind, endpoint, c, n)
				if err != nil {
					return fmt.Errorf("inline engine on %s with %s: %w", kind, b, err)
				}
				got[kind][b] = append(got[kind][b], r)
			}
		}
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }
	fmt.Fprintf(w, "## Local activities supervised inline, build beside build, with DynamoDB's calls counted\n\n")
	fmt.Fprintf(w, "Measured on %s by `scripts/dynamodb-local run -- go run ./tools/benchreport -inline-hop -bin DIR -before DIR0` (`--supervise inline`; each build %d times on each store, alternating; load average %s at the start, %s at the end: the machine is shared). %d ready `true` activities through one `whimbrel-launcher` (`--log-dir`) with one `whimbrel-monitor` beside it; CPU is user + system of the launcher, every process it reaped and the monitor, per activity. Then a chain of %d activities through a fresh launcher on the same store: the hop is a command's start after its upstream's end. On DynamoDB Local the launcher's and the monitor's calls go through a counting proxy: per activity of the %d, and per hop of the chain (its %d activities' calls over its %d hops).\n\n",
		time.Now().UTC().Format("2006-01-02"), engineRounds, load0, loadAverage(), n, engineChain, n, engineChain, engineChain-1)
	fmt.Fprintf(w, "| store | binaries | activities per second | CPU per activity | of it the launcher's own process | the monitor's | the commands | hop p50 | hop p95 | calls per activity | calls per hop |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	per := func(m map[string]int, d int) string {
		if m == nil {
			return "–"
		}
		return fmt.Sprintf("%.1f", float64(total(m))/float64(d))
	}
	for _, kind := range []string{"sqlite", "dynamodb"} {
		for _, b := range builds {
			for _, r := range got[kind][b] {
				fmt.Fprintf(w, "| %s | %s | %.1f | %s ms | %s ms | %s ms | %s ms | %s ms | %s ms | %s | %s |\n", kind, b, r.perSecond, ms(r.cpu), ms(r.launcher), ms(r.monitor),
					ms(r.cpu-r.launcher-r.monitor), ms(r.hops[len(r.hops)/2]), ms(r.hops[len(r.hops)*95/100]), per(r.fanCalls, n), per(r.hopCalls, engineChain-1))
			}
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "DynamoDB calls by operation, summed over each build's runs, per activity of the fan-out / per hop of the chain:\n\n| operation |")
	for _, b := range builds {
		fmt.Fprintf(w, " %s |", b)
	}
	fmt.Fprintf(w, "\n| --- |%s\n", strings.Repeat(" ---: |", len(builds)))
	ops := map[string]bool{}
	sum := map[string][2]map[string]int{}
	for _, b := range builds {
		s := [2]map[string]int{{}, {}}
		for _, r := range got["dynamodb"][b] {
			for op, v := range r.fanCalls {
				s[0][op] += v
				ops[op] = true
			}
			for op, v := range r.hopCalls {
				s[1][op] += v
				ops[op] = true
			}
		}
		sum[b] = s
	}
	var names []string
	for op := range ops {
		names = append(names, op)
	}
	sort.Strings(names)
	runs := len(got["dynamodb"][bin])
	for _, op := range names {
		fmt.Fprintf(w, "| %s |", op)
		for _, b := range builds {
			fmt.Fprintf(w, " %.2f / %.2f |", float64(sum[b][0][op])/float64(runs*n), float64(sum[b][1][op])/float64(runs*(engineChain-1)))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	best := func(kind, b string) (cpu, hop time.Duration) {
		for i, r := range got[kind][b] {
			if p50 := r.hops[len(r.hops)/2]; i == 0 || p50 < hop {
				hop = p50
			}
			if i == 0 || r.cpu < cpu {
				cpu = r.cpu
			}
		}
		return
	}
	verdict := func(ok bool) string {
		if ok {
			return "reached"
		}
		return "**not reached**"
	}
	fmt.Fprintf(w, "Targets, best of each build's runs:\n\n")
	for _, kind := range []string{"sqlite", "dynamodb"} {
		hopTarget := targetHopSQLite
		if kind == "dynamodb" {
			hopTarget = targetHopDynamo
		}
		for _, b := range builds {
			cpu, hop := best(kind, b)
			fmt.Fprintf(w, "- %s, %s: CPU per activity %s ms (target ≤ %s ms: %s); hop p50 %s ms (target ≤ %s ms: %s)\n",
				kind, b, ms(cpu), ms(targetCPU), verdict(cpu <= targetCPU), ms(hop), ms(hopTarget), verdict(hop <= hopTarget))
		}
	}
	fmt.Fprintln(w)
	return nil
}
