// Package ecs is the launcher's ECS backend: it starts each activity as
// an ECS task with RunTask. Only a binary that serves the ecs launch type
// links it, and with it the ECS SDK.
package ecs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsecs "github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/aws/smithy-go"

	"github.com/whimbrel/whimbrel/launcher"
)

// API lists the ECS calls the backend makes.
type API interface {
	RunTask(ctx context.Context, in *awsecs.RunTaskInput, opts ...func(*awsecs.Options)) (*awsecs.RunTaskOutput, error)
}

// Backend starts each activity as an ECS task with RunTask. The task
// definition's container runs whimbrel-run; the identity goes in as
// container environment overrides, the activity's command (if any) as the
// container's command. The clientToken is derived from the activity and
// its attempt, so a repeated launch can never start a second task.
//
// Throttling, server errors, unreachable endpoints and the RunTask
// failures ECS documents as usually temporary (AGENT, RESOURCE:*, no
// capacity) come back as launcher.TemporaryError, so the launcher tries
// again under the same clientToken; anything else fails the activity with
// ECS's message.
type Backend struct {
	API API
	// Cluster is the cluster of activities whose definition names none
	// (ECS's own default: the cluster named "default").
	Cluster string
}

// MaxOverrides is the most characters RunTask accepts for its overrides,
// JSON punctuation included.
const MaxOverrides = 8192

var _ launcher.Backend = (*Backend)(nil)

// NewClient returns the ECS client a launcher should use: the SDK's
// standard retries, without its retry quota. The launcher spaces its own
// retries; a quota that runs dry under sustained throttling would turn
// launches that only had to wait into errors at once.
func NewClient(cfg aws.Config, optFns ...func(*awsecs.Options)) *awsecs.Client {
	return awsecs.NewFromConfig(cfg, append([]func(*awsecs.Options){func(o *awsecs.Options) {
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) { so.RateLimiter = ratelimit.None })
	}}, optFns...)...)
}

// Launch implements launcher.Backend.
func (b *Backend) Launch(ctx context.Context, j launcher.Job) (string, error) {
	l := j.Settings.Launch
	override := types.ContainerOverride{Name: aws.String(l.Container)}
	for _, kv := range j.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		override.Environment = append(override.Environment, types.KeyValuePair{Name: aws.String(k), Value: aws.String(v)})
	}
	if len(j.Command) > 0 {
		override.Command = j.Command
	}
	in := &awsecs.RunTaskInput{
		TaskDefinition: aws.String(l.TaskDefinition),
		Count:          aws.Int32(1),
		ClientToken:    aws.String(j.LaunchToken()),
		StartedBy:      aws.String("whimbrel"),
		Overrides:      &types.TaskOverride{ContainerOverrides: []types.ContainerOverride{override}},
		Tags: []types.Tag{
			{Key: aws.String("whimbrel:activity_exec_id"), Value: aws.String(j.Key.ActivityExecID)},
			{Key: aws.String("whimbrel:workflow_exec_id"), Value: aws.String(j.Key.WorkflowExecID)},
		},
	}
	if l.Cluster != "" {
		in.Cluster = aws.String(l.Cluster)
	} else if b.Cluster != "" {
		in.Cluster = aws.String(b.Cluster)
	}
	if err := checkOverrides(j, override); err != nil {
		return "", err
	}
	if l.LaunchType != "" {
		in.LaunchType = types.LaunchType(l.LaunchType)
	}
	if l.PlatformVersion != "" {
		in.PlatformVersion = aws.String(l.PlatformVersion)
	}
	if l.CapacityProvider != "" {
		in.CapacityProviderStrategy = []types.CapacityProviderStrategyItem{{CapacityProvider: aws.String(l.CapacityProvider)}}
	}
	if len(l.Subnets) > 0 {
		ip := types.AssignPublicIpDisabled
		if l.AssignPublicIP {
			ip = types.AssignPublicIpEnabled
		}
		in.NetworkConfiguration = &types.NetworkConfiguration{AwsvpcConfiguration: &types.AwsVpcConfiguration{
			Subnets: l.Subnets, SecurityGroups: l.SecurityGroups, AssignPublicIp: ip,
		}}
	}
	out, err := b.API.RunTask(ctx, in)
	if err != nil {
		err = fmt.Errorf("ecs RunTask %s: %w", l.TaskDefinition, err)
		if temporaryAWS(err) {
			return "", &launcher.TemporaryError{Err: err}
		}
		return "", err
	}
	if len(out.Failures) > 0 {
		var reasons []string
		temporary := true
		for _, f := range out.Failures {
			r := aws.ToString(f.Reason)
			temporary = temporary && temporaryFailure(r)
			if d := aws.ToString(f.Detail); d != "" {
				r += ": " + d
			}
			if arn := aws.ToString(f.Arn); arn != "" {
				r += " (" + arn + ")"
			}
			reasons = append(reasons, r)
		}
		err := fmt.Errorf("ecs RunTask %s: %s", l.TaskDefinition, strings.Join(reasons, "; "))
		if temporary {
			return "", &launcher.TemporaryError{Err: err}
		}
		return "", err
	}
	if len(out.Tasks) == 0 || out.Tasks[0].TaskArn == nil {
		return "", errors.New("ecs RunTask answered with no task and no failure")
	}
	return aws.ToString(out.Tasks[0].TaskArn), nil
}

// temporaryAWS tells the errors of an AWS call that may pass: what the
// SDK itself would retry (throttling, 5xx, connection errors), a server
// fault, the SDK's own retry quota running out, and ECS short of capacity.
func temporaryAWS(err error) bool {
	var quota ratelimit.QuotaExceededError
	if errors.As(err, &quota) {
		return true
	}
	if retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary {
		return true
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorFault() == smithy.FaultServer || temporaryFailure(api.ErrorMessage())
	}
	return false
}

// temporaryFailure tells the RunTask failure reasons that ECS documents as
// usually temporary: an agent disconnected, a container instance short of
// CPU, memory, ports or ENIs, Fargate or a capacity provider short of
// capacity. MISSING, INACTIVE and ATTRIBUTE need someone to change
// something.
func temporaryFailure(reason string) bool {
	r := strings.ToLower(reason)
	return reason == "AGENT" || strings.HasPrefix(reason, "RESOURCE:") ||
		strings.Contains(r, "capacity is unavailable") || strings.Contains(r, "insufficient capacity") ||
		strings.Contains(r, "try again later")
}

// checkOverrides refuses, before calling ECS, overrides that ECS would
// refuse for their size, naming what takes the room.
func checkOverrides(j launcher.Job, o types.ContainerOverride) error {
	type kv struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	type container struct {
		Name        string   `json:"name"`
		Command     []string `json:"command,omitempty"`
		Environment []kv     `json:"environment,omitempty"`
	}
	c := container{Name: aws.ToString(o.Name), Command: o.Command}
	defEnv := 0
	for _, e := range o.Environment {
		c.Environment = append(c.Environment, kv{aws.ToString(e.Name), aws.ToString(e.Value)})
		if _, ok := j.Settings.Env[aws.ToString(e.Name)]; ok {
			defEnv += len(aws.ToString(e.Name)) + len(aws.ToString(e.Value)) + len(`{"name":"","value":""},`)
		}
	}
	b, err := json.Marshal(map[string][]container{"containerOverrides": {c}})
	if err != nil {
		return fmt.Errorf("encode the container overrides: %w", err)
	}
	if len(b) <= MaxOverrides {
		return nil
	}
	cmd, _ := json.Marshal(o.Command)
	return fmt.Errorf("the ECS container overrides of activity %s would be %d characters, more than the %d RunTask accepts "+
		"(the definition's env takes %d, the command %d, Whimbrel's own variables the rest): "+
		"move large values into the task definition or a file the command reads",
		j.ActivityName, len(b), MaxOverrides, defEnv, len(cmd))
}
