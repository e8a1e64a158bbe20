//go:build whimbrel_leanaws

package dynamodb

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/state"
)

// ConfigChain names where this build finds its AWS configuration, for
// --version.
const ConfigChain = "; AWS configuration from the environment, web identity, the container credentials endpoint " +
	"and instance metadata only: built with the whimbrel_leanaws tag"

// LoadConfig loads the SDK's configuration from what a container is given:
// the environment, a web identity token, the ECS or EKS container
// credentials endpoint, or the EC2 instance metadata service. The SDK's
// default chain (config.LoadDefaultConfig) also reads the shared
// configuration files and builds the SSO, SSO-OIDC, sign-in and process
// credential providers, which a container does not use and which make the
// binary larger and hold memory in every wrapper; this build refuses the
// settings only that chain honours (see leanRefused) rather than ignore
// them.
func LoadConfig(ctx context.Context, log hclog.Logger) (aws.Config, error) {
	return loadConfig(ctx, log, DefaultAttemptTimeout)
}

// loadConfig is LoadConfig with each HTTP attempt (connecting included)
// bounded by attempt.
func loadConfig(_ context.Context, log hclog.Logger, attempt time.Duration) (aws.Config, error) {
	if err := leanRefused(); err != nil {
		return aws.Config{}, err
	}
	src, err := readLeanEnv()
	if err != nil {
		return aws.Config{}, err
	}
	client := httpClient(attempt)
	if path := os.Getenv("AWS_CA_BUNDLE"); path != "" {
		if client, err = withCABundle(client, path); err != nil {
			return aws.Config{}, err
		}
	}
	cfg := aws.Config{
		Region:                src.region,
		HTTPClient:            client,
		Logger:                sdkLogger(log),
		ConfigSources:         []interface{}{src},
		AppID:                 os.Getenv("AWS_SDK_UA_APP_ID"),
		AccountIDEndpointMode: src.accountIDMode,
		RetryMaxAttempts:      src.maxAttempts,
		RetryMode:             src.retryMode,
	}
	if src.endpoint != "" {
		cfg.BaseEndpoint = aws.String(src.endpoint)
	}
	if cfg.Credentials, err = leanCredentials(cfg, src); err != nil {
		return aws.Config{}, err
	}
	return cfg, nil
}

// reachHelp says what the configuration needs to reach DynamoDB.
const reachHelp = "to reach DynamoDB, set AWS_REGION, credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, " +
	"any values for DynamoDB Local; or AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN; or a task's, pod's or instance's role) " +
	"and, for DynamoDB Local, AWS_ENDPOINT_URL_DYNAMODB"

// leanHelp ends every refusal of this build's configuration.
const leanHelp = "this build (the whimbrel_leanaws tag, as the container image's whimbrel-run) reads AWS settings " +
	"only from the environment (AWS_REGION, AWS_ACCESS_KEY_ID, AWS_WEB_IDENTITY_TOKEN_FILE, " +
	"AWS_CONTAINER_CREDENTIALS_*, the instance metadata): unset it, or use whimbrel-run-full " +
	"(beside whimbrel-run in the container image) or a build without the tag"

// leanRefusedEnv are the variables the SDK's default chain honours and this
// build does not, with what each selects there.
var leanRefusedEnv = []struct{ name, what string }{
	{"AWS_PROFILE", "a profile of the shared AWS configuration files"},
	{"AWS_DEFAULT_PROFILE", "a profile of the shared AWS configuration files"},
	{"AWS_CONFIG_FILE", "the shared AWS configuration file"},
	{"AWS_SHARED_CREDENTIALS_FILE", "the shared AWS credentials file"},
	{"AWS_DEFAULTS_MODE", "the SDK's defaults mode"},
	{"AWS_AUTH_SCHEME_PREFERENCE", "the signing schemes preferred"},
	{"AWS_REQUEST_CHECKSUM_CALCULATION", "when requests carry checksums"},
	{"AWS_RESPONSE_CHECKSUM_VALIDATION", "when responses' checksums are validated"},
	{"AWS_DISABLE_CLOCK_SKEW_CORRECTION", "the SDK's clock skew correction"},
}

// leanRefused returns a configuration error naming the first setting only
// the SDK's default chain honours: a profile, the shared files (named by
// variable or present at their default paths, where SSO, process and
// assume-role credentials live) or one of leanRefusedEnv.
func leanRefused() error {
	for _, v := range leanRefusedEnv {
		if val, ok := os.LookupEnv(v.name); ok && val != "" {
			return &state.ConfigError{Msg: fmt.Sprintf("%s is set (%s): %s", v.name, v.what, leanHelp)}
		}
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return nil // no home directory, so no shared files at their default paths
	}
	for _, f := range []string{".aws/config", ".aws/credentials"} {
		path := home + "/" + f
		if _, err := os.Stat(path); err == nil {
			return &state.ConfigError{Msg: fmt.Sprintf("the shared AWS file %s exists (profiles, SSO and process "+
				"credentials are set there): %s", path, leanHelp)}
		}
	}
	return nil
}

// leanEnv is this build's configuration read from the environment. It
// serves the SDK's configuration-source interfaces that the DynamoDB and
// instance-metadata clients query (endpoint, FIPS, dual-stack, endpoint
// discovery, the metadata endpoint's mode), as the SDK's own EnvConfig
// does in the default chain.
type leanEnv struct {
	region        string
	endpoint      string // AWS_ENDPOINT_URL
	ignoreEndpts  bool
	maxAttempts   int
	retryMode     aws.RetryMode
	accountIDMode aws.AccountIDEndpointMode
	fips          aws.FIPSEndpointState
	dualStack     aws.DualStackEndpointState
	discovery     aws.EndpointDiscoveryEnableState
	imdsMode      imds.EndpointModeState
	imdsV1Off     *bool
}

// readLeanEnv reads leanEnv, refusing a value the SDK's default chain
// would refuse too, with the variable's name.
func readLeanEnv() (*leanEnv, error) {
	e := &leanEnv{region: os.Getenv("AWS_REGION")}
	if e.region == "" {
		e.region = os.Getenv("AWS_DEFAULT_REGION")
	}
	bad := func(name, val, want string) error {
		return &state.ConfigError{Msg: fmt.Sprintf("%s=%q is not valid: want %s", name, val, want)}
	}
	boolEnv := func(name string) (set, on bool, err error) {
		switch v := os.Getenv(name); strings.ToLower(v) {
		case "":
			return false, false, nil
		case "true":
			return true, true, nil
		case "false":
			return true, false, nil
		default:
			return false, false, bad(name, v, "true or false")
		}
	}
	var err error
	var set, on bool
	if _, e.ignoreEndpts, err = boolEnv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"); err != nil {
		return nil, err
	}
	if !e.ignoreEndpts {
		e.endpoint = os.Getenv("AWS_ENDPOINT_URL")
	}
	if v := os.Getenv("AWS_MAX_ATTEMPTS"); v != "" {
		if e.maxAttempts, err = strconv.Atoi(v); err != nil || e.maxAttempts < 0 {
			return nil, bad("AWS_MAX_ATTEMPTS", v, "a whole number of attempts")
		}
	}
	if v := os.Getenv("AWS_RETRY_MODE"); v != "" {
		if e.retryMode, err = aws.ParseRetryMode(v); err != nil {
			return nil, bad("AWS_RETRY_MODE", v, "standard or adaptive")
		}
	}
	switch v := os.Getenv("AWS_ACCOUNT_ID_ENDPOINT_MODE"); v {
	case "":
	case "preferred", "required", "disabled":
		e.accountIDMode = aws.AccountIDEndpointMode(v)
	default:
		return nil, bad("AWS_ACCOUNT_ID_ENDPOINT_MODE", v, "preferred, required or disabled")
	}
	if set, on, err = boolEnv("AWS_USE_FIPS_ENDPOINT"); err != nil {
		return nil, err
	} else if set {
		e.fips = aws.FIPSEndpointStateDisabled
		if on {
			e.fips = aws.FIPSEndpointStateEnabled
		}
	}
	if set, on, err = boolEnv("AWS_USE_DUALSTACK_ENDPOINT"); err != nil {
		return nil, err
	} else if set {
		e.dualStack = aws.DualStackEndpointStateDisabled
		if on {
			e.dualStack = aws.DualStackEndpointStateEnabled
		}
	}
	switch v := os.Getenv("AWS_ENABLE_ENDPOINT_DISCOVERY"); strings.ToLower(v) {
	case "":
	case "true":
		e.discovery = aws.EndpointDiscoveryEnabled
	case "false":
		e.discovery = aws.EndpointDiscoveryDisabled
	case "auto":
		e.discovery = aws.EndpointDiscoveryAuto
	default:
		return nil, bad("AWS_ENABLE_ENDPOINT_DISCOVERY", v, "true, false or auto")
	}
	if v := os.Getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE"); v != "" {
		if err := e.imdsMode.SetFromString(v); err != nil {
			return nil, bad("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", v, "IPv4 or IPv6")
		}
	}
	if set, on, err = boolEnv("AWS_EC2_METADATA_V1_DISABLED"); err != nil {
		return nil, err
	} else if set {
		e.imdsV1Off = &on
	}
	return e, nil
}

// GetServiceBaseEndpoint serves AWS_ENDPOINT_URL_<SERVICE>, which the
// DynamoDB client asks for by its SDK id.
func (e *leanEnv) GetServiceBaseEndpoint(_ context.Context, sdkID string) (string, bool, error) {
	if e.ignoreEndpts {
		return "", false, nil
	}
	v := os.Getenv("AWS_ENDPOINT_URL_" + strings.ReplaceAll(strings.ToUpper(sdkID), " ", "_"))
	return v, v != "", nil
}

// GetUseFIPSEndpoint serves AWS_USE_FIPS_ENDPOINT.
func (e *leanEnv) GetUseFIPSEndpoint(context.Context) (aws.FIPSEndpointState, bool, error) {
	return e.fips, e.fips != aws.FIPSEndpointStateUnset, nil
}

// GetUseDualStackEndpoint serves AWS_USE_DUALSTACK_ENDPOINT.
func (e *leanEnv) GetUseDualStackEndpoint(context.Context) (aws.DualStackEndpointState, bool, error) {
	return e.dualStack, e.dualStack != aws.DualStackEndpointStateUnset, nil
}

// GetEnableEndpointDiscovery serves AWS_ENABLE_ENDPOINT_DISCOVERY.
func (e *leanEnv) GetEnableEndpointDiscovery(context.Context) (aws.EndpointDiscoveryEnableState, bool, error) {
	return e.discovery, e.discovery != aws.EndpointDiscoveryUnset, nil
}

// GetEC2IMDSEndpointMode serves AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE (the
// metadata client reads AWS_EC2_METADATA_DISABLED and
// AWS_EC2_METADATA_SERVICE_ENDPOINT itself).
func (e *leanEnv) GetEC2IMDSEndpointMode() (imds.EndpointModeState, bool, error) {
	return e.imdsMode, e.imdsMode != imds.EndpointModeStateUnset, nil
}

// GetEC2IMDSV1FallbackDisabled serves AWS_EC2_METADATA_V1_DISABLED.
func (e *leanEnv) GetEC2IMDSV1FallbackDisabled() (bool, bool) {
	if e.imdsV1Off == nil {
		return false, false
	}
	return *e.imdsV1Off, true
}

// withCABundle trusts only the certificates of the PEM file at path, as
// the SDK's default chain does with AWS_CA_BUNDLE.
func withCABundle(client *awshttp.BuildableClient, path string) (*awshttp.BuildableClient, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, &state.ConfigError{Msg: fmt.Sprintf("read AWS_CA_BUNDLE %s: %v", path, err), Err: err}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, &state.ConfigError{Msg: fmt.Sprintf("AWS_CA_BUNDLE %s holds no PEM certificate", path)}
	}
	return client.WithTransportOptions(func(tr *http.Transport) {
		if tr.TLSClientConfig == nil {
			tr.TLSClientConfig = &tls.Config{}
		}
		tr.TLSClientConfig.RootCAs = pool
	}), nil
}
