//go:build whimbrel_leanaws

package dynamodb

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds"
	"github.com/aws/aws-sdk-go-v2/credentials/endpointcreds"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/whimbrel/whimbrel/state"
)

// ecsCredentialsHost is where ECS serves a task's credentials at
// AWS_CONTAINER_CREDENTIALS_RELATIVE_URI.
const ecsCredentialsHost = "http://169.254.170.2"

// containerHosts are the link-local addresses of the ECS and EKS Pod
// Identity credentials endpoints, which may be reached over plain HTTP.
var containerHosts = []net.IP{net.ParseIP("169.254.170.2"), net.ParseIP("169.254.170.23"), net.ParseIP("fd00:ec2::23")}

// leanCredentials picks the first source that is set, in the order of the
// SDK's default chain when no profile is named: access keys in the
// environment, a web identity token (EKS IRSA, the kubernetes launcher),
// the container credentials endpoint (ECS, EKS Pod Identity), then the
// EC2 instance metadata service. Each is the SDK's own provider, behind
// the SDK's credentials cache.
func leanCredentials(cfg aws.Config, e *leanEnv) (aws.CredentialsProvider, error) {
	id, secret := firstEnv("AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY"), firstEnv("AWS_SECRET_ACCESS_KEY", "AWS_SECRET_KEY")
	if id != "" && secret != "" {
		return aws.NewCredentialsCache(credentials.StaticCredentialsProvider{Value: aws.Credentials{
			AccessKeyID: id, SecretAccessKey: secret, SessionToken: os.Getenv("AWS_SESSION_TOKEN"),
			AccountID: os.Getenv("AWS_ACCOUNT_ID"), Source: "EnvironmentVariables",
		}}), nil
	}
	if tokenFile := os.Getenv("AWS_WEB_IDENTITY_TOKEN_FILE"); tokenFile != "" {
		role := os.Getenv("AWS_ROLE_ARN")
		if role == "" {
			return nil, &state.ConfigError{Msg: "AWS_WEB_IDENTITY_TOKEN_FILE is set but AWS_ROLE_ARN is not: set the role to assume with the token"}
		}
		p := stscreds.NewWebIdentityRoleProvider(sts.NewFromConfig(cfg), role, stscreds.IdentityTokenFile(tokenFile),
			func(o *stscreds.WebIdentityRoleOptions) { o.RoleSessionName = os.Getenv("AWS_ROLE_SESSION_NAME") })
		return aws.NewCredentialsCache(p), nil
	}
	if rel := os.Getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"); rel != "" {
		return containerCredentials(cfg, ecsCredentialsHost+rel), nil
	}
	if full := os.Getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI"); full != "" {
		if err := checkContainerURI(full); err != nil {
			return nil, err
		}
		return containerCredentials(cfg, full), nil
	}
	client := imds.NewFromConfig(cfg)
	return aws.NewCredentialsCache(ec2rolecreds.New(func(o *ec2rolecreds.Options) { o.Client = client })), nil
}

// containerCredentials asks the container credentials endpoint at uri,
// with AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE's content (read again each
// time: EKS rotates it) or AWS_CONTAINER_AUTHORIZATION_TOKEN as the
// Authorization header. Credentials are renewed 5 minutes before they
// expire, as the SDK's default chain renews them.
func containerCredentials(cfg aws.Config, uri string) aws.CredentialsProvider {
	p := endpointcreds.New(uri, func(o *endpointcreds.Options) {
		o.HTTPClient = cfg.HTTPClient
		o.AuthorizationToken = os.Getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN")
		if path := os.Getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"); path != "" {
			o.AuthorizationTokenProvider = endpointcreds.TokenProviderFunc(func() (string, error) {
				b, err := os.ReadFile(path)
				if err != nil {
					return "", fmt.Errorf("read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE %s: %w", path, err)
				}
				return string(b), nil
			})
		}
	})
	return aws.NewCredentialsCache(p, func(o *aws.CredentialsCacheOptions) { o.ExpiryWindow = 5 * time.Minute })
}

// checkContainerURI refuses an AWS_CONTAINER_CREDENTIALS_FULL_URI that
// would send the token in clear over the network: plain HTTP only to a
// loopback address or to the ECS and EKS endpoints' link-local ones, as
// the SDK's default chain requires.
func checkContainerURI(uri string) error {
	bad := func(why string) error {
		return &state.ConfigError{Msg: fmt.Sprintf("AWS_CONTAINER_CREDENTIALS_FULL_URI=%q: %s", uri, why)}
	}
	u, err := url.Parse(uri)
	if err != nil || u.Hostname() == "" {
		return bad("not a URL with a host")
	}
	if u.Scheme != "http" {
		return nil
	}
	addrs := []string{u.Hostname()}
	if net.ParseIP(u.Hostname()) == nil {
		if addrs, err = net.LookupHost(u.Hostname()); err != nil {
			return bad(fmt.Sprintf("resolve its host: %v", err))
		}
	}
	for _, a := range addrs {
		ip := net.ParseIP(a)
		if ip == nil || !(ip.IsLoopback() || ip.Equal(containerHosts[0]) || ip.Equal(containerHosts[1]) || ip.Equal(containerHosts[2])) {
			return bad("plain HTTP is allowed only to a loopback address or the ECS and EKS credentials endpoints; use https")
		}
	}
	return nil
}

// firstEnv returns the first of names that is set and not empty.
func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}
