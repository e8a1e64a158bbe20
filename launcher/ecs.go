package launcher

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/ecs/types"
)

// ECSAPI lists the ECS calls the backend makes.
type ECSAPI interface {
	RunTask(ctx context.Context, in *ecs.RunTaskInput, opts ...func(*ecs.Options)) (*ecs.RunTaskOutput, error)
}

// ECS starts each activity as an ECS task with RunTask. The task
// definition's container runs whimbrel-run; the identity goes in as
// container environment overrides, the activity's command (if any) as the
// container's command. The clientToken is derived from the activity and
// its attempt, so a repeated launch can never start a second task.
type ECS struct {
	API ECSAPI
}

var _ Backend = (*ECS)(nil)

// Launch implements Backend.
func (b *ECS) Launch(ctx context.Context, j Job) (string, error) {
	l := j.Settings.Launch
	override := types.ContainerOverride{Name: aws.String(l.Container)}
	for _, kv := range envList(j.Env) {
		k, v, _ := strings.Cut(kv, "=")
		override.Environment = append(override.Environment, types.KeyValuePair{Name: aws.String(k), Value: aws.String(v)})
	}
	if len(j.Command) > 0 {
		override.Command = j.Command
	}
	in := &ecs.RunTaskInput{
		TaskDefinition: aws.String(l.TaskDefinition),
		Count:          aws.Int32(1),
		ClientToken:    aws.String(token(j)),
		StartedBy:      aws.String("whimbrel"),
		Overrides:      &types.TaskOverride{ContainerOverrides: []types.ContainerOverride{override}},
		Tags: []types.Tag{
			{Key: aws.String("whimbrel:activity_exec_id"), Value: aws.String(j.Key.ActivityExecID)},
			{Key: aws.String("whimbrel:workflow_exec_id"), Value: aws.String(j.Key.WorkflowExecID)},
		},
	}
	if l.Cluster != "" {
		in.Cluster = aws.String(l.Cluster)
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
		return "", fmt.Errorf("ecs RunTask %s: %w", l.TaskDefinition, err)
	}
	if len(out.Failures) > 0 {
		var reasons []string
		for _, f := range out.Failures {
			r := aws.ToString(f.Reason)
			if d := aws.ToString(f.Detail); d != "" {
				r += ": " + d
			}
			if arn := aws.ToString(f.Arn); arn != "" {
				r += " (" + arn + ")"
			}
			reasons = append(reasons, r)
		}
		return "", fmt.Errorf("ecs RunTask %s: %s", l.TaskDefinition, strings.Join(reasons, "; "))
	}
	if len(out.Tasks) == 0 || out.Tasks[0].TaskArn == nil {
		return "", errors.New("ecs RunTask answered with no task")
	}
	return aws.ToString(out.Tasks[0].TaskArn), nil
}
