package web

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/internal/testbin"
)

// serveListen runs a Server on a listener made by Listen, until the test ends.
func serveListen(t *testing.T, opts Options, lo ListenOptions) (addr string, logs *testbin.Buffer) {
	t.Helper()
	logs = &testbin.Buffer{}
	opts.Logger = hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug})
	if opts.Token == "" {
		opts.Token = testToken
	}
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if lo.Addr == "" {
		lo.Addr = "127.0.0.1:0"
	}
	ln, err := Listen(lo, opts.Logger)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the server did not stop")
		}
	})
	return ln.Addr().String(), logs
}

// TestSlowBodiesAreCutWhileAPageIsServed: 200 connections without a token,
// each declaring a 200 KB body and sending it a byte every 2 s, are all
// closed within the read timeout, and meanwhile a request with the token
// gets its page.
func TestSlowBodiesAreCutWhileAPageIsServed(t *testing.T) {
	t.Parallel()
	const readTimeout = 3 * time.Second
	addr, _ := serveListen(t, Options{Store: sqliteStore(t), ReadTimeout: readTimeout}, ListenOptions{})

	stop := make(chan struct{})
	var writers sync.WaitGroup
	t.Cleanup(func() { close(stop); writers.Wait() })
	const n = 200
	closed := make(chan time.Duration, n)
	began := time.Now()
	for i := range n {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "POST /api/workflows/x/cancel HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n", addr, 200<<10)
		writers.Add(2)
		go func() { // the slow body
			defer writers.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Second):
				}
				if _, err := c.Write([]byte("a")); err != nil {
					return
				}
			}
		}()
		go func() { // waits for the server to close the connection
			defer writers.Done()
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Minute))
			_, _ = io.Copy(io.Discard, c)
			closed <- time.Since(began)
		}()
	}

	req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("the page with the token, beside 200 slow connections: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "<html") {
		t.Errorf("the page with the token: %d, want 200 with the page", resp.StatusCode)
	}

	// Dialling 200 connections on a loaded machine takes time of its own:
	// the bound is the read timeout after the last, plus generous slack.
	limit := time.Since(began) + readTimeout + 20*time.Second
	var last time.Duration
	for range n {
		select {
		case d := <-closed:
			last = max(last, d)
		case <-time.After(time.Until(began.Add(limit))):
			t.Fatalf("slow connections still open %s after the first was opened (read timeout %s)", time.Since(began).Round(time.Second), readTimeout)
		}
	}
	t.Logf("the last slow connection was closed %s after the first was opened", last.Round(time.Millisecond))
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key,
// and returns their files and a pool that trusts it.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "whimbrel test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestTLS: with a certificate and its key the view answers over HTTPS, and
// a plain HTTP request gets no page.
func TestTLS(t *testing.T) {
	t.Parallel()
	certFile, keyFile, pool := selfSigned(t)
	addr, _ := serveListen(t, Options{Store: sqliteStore(t)}, ListenOptions{CertFile: certFile, KeyFile: keyFile})
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, _ := http.NewRequest("GET", "https://"+addr+"/api/workflows", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET over TLS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS == nil {
		t.Errorf("GET over TLS: %d (TLS %v), want 200 over TLS", resp.StatusCode, resp.TLS != nil)
	}
	plain, err := (&http.Client{Timeout: 30 * time.Second}).Get("http://" + addr + "/api/workflows")
	if err == nil {
		plain.Body.Close()
		if plain.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP on the TLS port: %d, want no page", plain.StatusCode)
		}
	}

	if _, err := Listen(ListenOptions{Addr: "127.0.0.1:0", CertFile: certFile}, nil); err == nil || !strings.Contains(err.Error(), "--tls-key") {
		t.Errorf("a certificate without its key: %v, want refused naming --tls-key", err)
	}
}

// TestOpenAddressWithoutTLSWarns: listening beyond loopback in clear says
// so; on loopback, or with TLS, it does not.
func TestOpenAddressWithoutTLSWarns(t *testing.T) {
	t.Parallel()
	certFile, keyFile, _ := selfSigned(t)
	for _, c := range []struct {
		lo   ListenOptions
		warn bool
	}{
		{ListenOptions{Addr: "0.0.0.0:0"}, true},
		{ListenOptions{Addr: "127.0.0.1:0"}, false},
		{ListenOptions{Addr: "0.0.0.0:0", CertFile: certFile, KeyFile: keyFile}, false},
	} {
		var logs testbin.Buffer
		ln, err := Listen(c.lo, hclog.New(&hclog.LoggerOptions{Output: &logs}))
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
		if got := strings.Contains(logs.String(), "without TLS"); got != c.warn {
			t.Errorf("%+v: warned %v, want %v\n%s", c.lo, got, c.warn, logs.String())
		}
	}
}

// TestFailedAuthenticationsAreLoggedAndSlowed: each wrong token is logged
// with the client's address and never the token; after a burst, that
// address is refused (429, Retry-After) without its tokens being compared,
// even the right one; a request without any token is neither counted nor
// refused.
func TestFailedAuthenticationsAreLoggedAndSlowed(t *testing.T) {
	t.Parallel()
	addr, logs := serveListen(t, Options{Store: sqliteStore(t)}, ListenOptions{})
	client := &http.Client{Timeout: 30 * time.Second}
	get := func(tok string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+addr+"/api/workflows", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for range 3 {
		if code := get("").StatusCode; code != http.StatusUnauthorized {
			t.Fatalf("without a token: %d, want 401", code)
		}
	}
	const wrong = "wrong-guess-of-the-token-42"
	var codes []int
	for range failBurst + 2 {
		codes = append(codes, get(wrong).StatusCode)
	}
	for i, code := range codes {
		want := http.StatusUnauthorized
		if i >= failBurst {
			want = http.StatusTooManyRequests
		}
		if code != want {
			t.Errorf("wrong token, attempt %d: %d, want %d (all: %v)", i+1, code, want, codes)
			break
		}
	}
	resp := get(testToken)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("the right token right after the burst: %d (Retry-After %q), want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if code := get("").StatusCode; code != http.StatusUnauthorized {
		t.Errorf("without a token, while refused: %d, want 401", code)
	}
	out := logs.String()
	if n := strings.Count(out, "failed authentication"); n != failBurst {
		t.Errorf("%d failed authentications logged, want %d\n%s", n, failBurst, out)
	}
	if !strings.Contains(out, "client=127.0.0.1") || strings.Contains(out, wrong) || strings.Contains(out, testToken) {
		t.Errorf("the log must name the client and never a token:\n%s", out)
	}
	if strings.Count(out, "too often") != 1 {
		t.Errorf("want the refusal logged once:\n%s", out)
	}
	// The bucket leaks: after a while the address may try again.
	deadline := time.Now().Add(time.Minute)
	for get(testToken).StatusCode != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("the address is still refused a minute later")
		}
		time.Sleep(failRefill)
	}
}

// TestTokenFile: a token file open to group or others is refused with the
// chmod to run; a token with few distinct characters is called weak.
func TestTokenFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	open := filepath.Join(dir, "my token")
	if err := os.WriteFile(open, []byte("0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Token(open, ""); err == nil || !strings.Contains(err.Error(), "chmod 600 '"+open+"'") {
		t.Errorf("a token file readable by others: %v, want refused with the chmod to run", err)
	}
	if err := os.Chmod(open, 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, given, err := Token(open, ""); err != nil || !given || tok != "0123456789abcdef0123" {
		t.Errorf("a private token file: %q, %v, %v", tok, given, err)
	}
	for tok, weak := range map[string]bool{"aaaaaaaaaaaaaaaaaaaa": true, "1234123412341234": true, "abcdefgh12345678": false, testToken: false} {
		if got := WeakToken(tok) != ""; got != weak {
			t.Errorf("WeakToken(%q) = %v, want %v", tok, got, weak)
		}
	}
}

// TestConnectionCap: past MaxConns open connections, the next is accepted
// only once one of them closes.
func TestConnectionCap(t *testing.T) {
	t.Parallel()
	ln, err := Listen(ListenOptions{Addr: "127.0.0.1:0", MaxConns: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	t.Cleanup(func() { ln.Close() })
	for range 2 {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	var first net.Conn
	select {
	case first = <-accepted:
	case <-time.After(20 * time.Second):
		t.Fatal("the first connection was never accepted")
	}
	select {
	case <-accepted:
		t.Fatal("a second connection was accepted while the first is open (MaxConns 1)")
	case <-time.After(time.Second):
	}
	first.Close()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(20 * time.Second):
		t.Fatal("the second connection was not accepted after the first closed")
	}
}
