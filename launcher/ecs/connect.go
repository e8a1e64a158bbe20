package ecs

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	awsecs "github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/smithy-go"
	"github.com/hashicorp/go-hclog"
)

// Connect builds the backend of a launcher process: the client of
// NewClient, from the AWS SDK's default configuration, and cluster as the
// cluster of activities whose definition names none. It checks, within
// ctx, that the cluster answers, since a launcher that cannot launch would
// fail every activity it claims; a role that may not describe clusters is
// only warned about (log), as it may still run tasks.
func Connect(ctx context.Context, cluster string, log hclog.Logger) (*Backend, error) {
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load the AWS configuration for ECS: %w", err)
	}
	if awsCfg.Region == "" {
		return nil, errors.New("ECS needs a region: set AWS_REGION (or a profile's region with AWS_PROFILE)")
	}
	client := NewClient(awsCfg)
	out, err := client.DescribeClusters(ctx, &awsecs.DescribeClustersInput{Clusters: []string{cluster}})
	var api smithy.APIError
	switch {
	case errors.As(err, &api) && api.ErrorCode() == "AccessDeniedException":
		log.Warn("cannot check the ECS cluster at start: the launcher's role lacks ecs:DescribeClusters", "cluster", cluster)
	case err != nil:
		return nil, fmt.Errorf("cannot reach ECS in %s to check cluster %q: %w", awsCfg.Region, cluster, err)
	case len(out.Clusters) == 0 || aws.ToString(out.Clusters[0].Status) == "INACTIVE":
		return nil, fmt.Errorf("ECS cluster %q does not exist in %s (or is inactive): name an active one with --ecs-cluster", cluster, awsCfg.Region)
	}
	return &Backend{API: client, Cluster: cluster}, nil
}
