package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/storetest"
)

// containerTags builds whimbrel-run as the container image does: no
// embedded store, and AWS settings from the environment, web identity, the
// container credentials endpoint and instance metadata only.
const containerTags = leanTag + ",whimbrel_leanaws"

var (
	containerOnce sync.Once
	containerBin  string
	containerErr  error
)

// containerBuild builds whimbrel-run with containerTags, once for every
// test that needs it.
func containerBuild(t *testing.T) string {
	t.Helper()
	containerOnce.Do(func() {
		dir, err := os.MkdirTemp("", "whimbrel-run-container-")
		if err != nil {
			containerErr = err
			return
		}
		containerBin = filepath.Join(dir, "whimbrel-run")
		if out, err := exec.Command("go", "build", "-tags", containerTags, "-o", containerBin, ".").CombinedOutput(); err != nil {
			containerErr = fmt.Errorf("go build -tags %s: %v\n%s", containerTags, err, out)
		}
	})
	if containerErr != nil {
		t.Fatal(containerErr)
	}
	return containerBin
}

// TestContainerBuildLinksNoDefaultChain: the container build links none
// of the SDK's default chain (its configuration package and the SSO,
// SSO-OIDC, sign-in and process credential providers), but the container's
// providers; the full build links the default chain.
func TestContainerBuildLinksNoDefaultChain(t *testing.T) {
	t.Parallel()
	deps := func(tags ...string) string {
		out, err := exec.Command("go", append(append([]string{"list"}, tags...), "-deps", ".")...).Output()
		if err != nil {
			t.Fatalf("go list -deps %v: %v", tags, err)
		}
		return string(out)
	}
	const sdk = "github.com/aws/aws-sdk-go-v2/"
	chain := []string{"config", "service/sso", "service/ssooidc", "service/signin", "credentials/ssocreds",
		"credentials/processcreds", "credentials/logincreds"}
	kept := []string{"credentials/endpointcreds", "credentials/ec2rolecreds", "credentials/stscreds", "service/sts"}
	lean, full := deps("-tags", containerTags), deps()
	for _, p := range chain {
		if strings.Contains(lean, sdk+p+"\n") {
			t.Errorf("the container build links %s", sdk+p)
		}
		if !strings.Contains(full, sdk+p+"\n") {
			t.Errorf("the full build does not link %s", sdk+p)
		}
	}
	for _, p := range kept {
		if !strings.Contains(lean, sdk+p+"\n") {
			t.Errorf("the container build does not link %s", sdk+p)
		}
	}
}

// keyRecorder is a reverse proxy in front of DynamoDB Local that records
// the access key id every request was signed with.
type keyRecorder struct {
	mu   sync.Mutex
	keys map[string]int
	url  string
}

var credentialRE = regexp.MustCompile(`Credential=([^/]+)/`)

func newKeyRecorder(t *testing.T) *keyRecorder {
	t.Helper()
	target, err := url.Parse(dynamotest.Endpoint(t))
	if err != nil {
		t.Fatal(err)
	}
	r := &keyRecorder{keys: map[string]int{}}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if m := credentialRE.FindStringSubmatch(req.Header.Get("Authorization")); m != nil {
			r.mu.Lock()
			r.keys[m[1]]++
			r.mu.Unlock()
		}
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

func (r *keyRecorder) seen(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keys[key]
}

// withoutKeys is env without the access keys dynamotest sets.
func withoutKeys(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "AWS_ACCESS_KEY_ID=") && !strings.HasPrefix(kv, "AWS_SECRET_ACCESS_KEY=") {
			out = append(out, kv)
		}
	}
	return out
}

// TestContainerBuildCredentials: the container build signs its DynamoDB
// calls with credentials from each source a container is given (access
// keys in the environment; the ECS/EKS container credentials endpoint,
// served here as ECS serves it, with EKS Pod Identity's token file; web
// identity through STS, served here as STS answers), runs the activity to
// COMPLETED on DynamoDB Local with them, and asks the endpoint and STS
// with the token and role it was given.
func TestContainerBuildCredentials(t *testing.T) {
	t.Parallel()
	bin := containerBuild(t)
	f := newFixture(t, storetest.DAG{"env": nil, "container": nil, "webid": nil})
	rec := newKeyRecorder(t)
	dir := t.TempDir()

	var mu sync.Mutex
	var asked []string
	note := func(s string) { mu.Lock(); asked = append(asked, s); mu.Unlock() }
	expires := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	creds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		note("container " + req.URL.Path + " " + req.Header.Get("Authorization"))
		if req.Header.Get("Authorization") != "pod-identity-token" {
			http.Error(w, `{"code":"AccessDenied","message":"bad token"}`, http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"AccessKeyId":"AKIDCONTAINER","SecretAccessKey":"s","Token":"t","Expiration":%q}`, expires)
	}))
	t.Cleanup(creds.Close)
	sts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_ = req.ParseForm()
		note("sts " + req.Form.Get("Action") + " " + req.Form.Get("RoleArn") + " " + req.Form.Get("WebIdentityToken"))
		w.Header().Set("Content-Type", "text/xml")
		fmt.Fprintf(w, `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
<AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>AKIDWEBID</AccessKeyId><SecretAccessKey>s</SecretAccessKey>
<SessionToken>t</SessionToken><Expiration>%s</Expiration></Credentials>
<AssumedRoleUser><Arn>arn:aws:sts::123456789012:assumed-role/etl/s</Arn><AssumedRoleId>AROAEXAMPLE:s</AssumedRoleId></AssumedRoleUser>
</AssumeRoleWithWebIdentityResult><ResponseMetadata><RequestId>1</RequestId></ResponseMetadata></AssumeRoleWithWebIdentityResponse>`, expires)
	}))
	t.Cleanup(sts.Close)
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("pod-identity-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	jwt := filepath.Join(dir, "jwt")
	if err := os.WriteFile(jwt, []byte("a.web.identity"), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name, key string
		env       []string
	}{
		{"env", "AKIDENV", []string{"AWS_ACCESS_KEY_ID=AKIDENV", "AWS_SECRET_ACCESS_KEY=s", "AWS_SESSION_TOKEN=t"}},
		{"container", "AKIDCONTAINER", []string{"AWS_CONTAINER_CREDENTIALS_FULL_URI=" + creds.URL + "/v1/credentials",
			"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=" + token}},
		{"webid", "AKIDWEBID", []string{"AWS_WEB_IDENTITY_TOKEN_FILE=" + jwt, "AWS_ROLE_ARN=arn:aws:iam::123456789012:role/etl",
			"AWS_ROLE_SESSION_NAME=s", "AWS_ENDPOINT_URL_STS=" + sts.URL}},
	} {
		f.queue(t, c.name)
		cmd := exec.Command(bin, "--", "true")
		cmd.Env = append(withoutKeys(f.env(t, c.name, "AWS_ENDPOINT_URL_DYNAMODB="+rec.url)), c.env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", c.name, err, out)
			continue
		}
		if a := f.get(t, c.name); a.State != state.Completed {
			t.Errorf("%s: the activity is %s, want COMPLETED", c.name, a.State)
		}
		if n := rec.seen(c.key); n < 2 {
			t.Errorf("%s: %d DynamoDB calls signed with %s, want the claim, the outcome and more (seen: %v)", c.name, n, c.key, rec.keys)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"container /v1/credentials pod-identity-token",
		"sts AssumeRoleWithWebIdentity arn:aws:iam::123456789012:role/etl a.web.identity"} {
		found := false
		for _, a := range asked {
			found = found || a == want
		}
		if !found {
			t.Errorf("no request %q; the endpoints were asked %q", want, asked)
		}
	}
}

// TestContainerBuildRefusesSharedConfig: the container build, given a
// setting that only the SDK's default chain honours (a profile, a shared
// file named or present at its default path, a plain-HTTP credentials
// endpoint off the host), exits 125 naming it and whimbrel-run-full, and
// leaves the activity QUEUED; the full build runs with a profile's file.
func TestContainerBuildRefusesSharedConfig(t *testing.T) {
	t.Parallel()
	bin := containerBuild(t)
	f := newFixture(t, storetest.DAG{"a": nil})
	f.queue(t, "a")
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".aws"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".aws", "config"), []byte("[default]\nregion = us-east-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env  []string
		want []string
	}{
		{[]string{"AWS_PROFILE=dev"}, []string{"AWS_PROFILE is set", "whimbrel-run-full", "whimbrel_leanaws"}},
		{[]string{"AWS_SHARED_CREDENTIALS_FILE=/etc/aws/credentials"}, []string{"AWS_SHARED_CREDENTIALS_FILE is set", "whimbrel-run-full"}},
		{[]string{"HOME=" + home}, []string{filepath.Join(home, ".aws", "config") + " exists", "whimbrel-run-full"}},
		{[]string{"AWS_ACCESS_KEY_ID=", "AWS_CONTAINER_CREDENTIALS_FULL_URI=http://192.0.2.1/creds"},
			[]string{"AWS_CONTAINER_CREDENTIALS_FULL_URI", "plain HTTP"}},
	} {
		cmd := exec.Command(bin, "--", "true")
		cmd.Env = append(f.env(t, "a"), c.env...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != state.ExitWrapperError {
			t.Errorf("%v: %v, want exit %d\n%s", c.env, err, state.ExitWrapperError, out)
		}
		for _, w := range c.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%v: the error lacks %q:\n%s", c.env, w, out)
			}
		}
		if a := f.get(t, "a"); a.State != state.Queued {
			t.Fatalf("%v: a is %s after the refused run, want QUEUED", c.env, a.State)
		}
	}

	cmd := exec.Command(binary, "--", "true")
	cmd.Env = append(f.env(t, "a"), "HOME="+home)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the full build with %s/.aws/config: %v\n%s", home, err, out)
	}
	if a := f.get(t, "a"); a.State != state.Completed {
		t.Errorf("a is %s after the full build's run, want COMPLETED", a.State)
	}
}
