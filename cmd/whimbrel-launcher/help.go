package main

// description is whimbrel-launcher's --help text.
const description = `Claim READY activities and start them. Each claim is one conditional write to QUEUED, so any number of
launchers may run at once and none launches an activity twice. A launch that
fails ends the activity FAILED with the reason.

Launch types (per activity in the workflow definition, default local):
  local    whimbrel-run -- COMMAND as a child process of this launcher
  docker   docker run --detach IMAGE [COMMAND]; the image's entrypoint is whimbrel-run
  ecs      ecs:RunTask of the task definition, identity as environment overrides
  kubernetes  one batch/v1 Job per attempt (--kubeconfig, --k8s-namespace); only
           when --types names it. While running, it deletes the Jobs of cancelled
           activities and fails those whose pod never starts, with Kubernetes's reason

On SIGTERM or SIGINT it stops claiming, finishes the backend calls in flight,
records them and exits; a launch that would have been retried is failed with
its last error, never left QUEUED. Local activities already started run on
under their own wrappers.

Launches run side by side (--workers). A launch that fails for a reason that
may pass (throttling, 5xx, an unreachable endpoint, ECS short of capacity) is
retried with backoff, under the same launch token, for --retry-for (or the
definition's launch.retry_for); any other failure fails the activity at once.

At start it refuses, with one line, a --log-dir it cannot create or write, a
docker CLI it cannot find, ECS without a cluster or a region, a Kubernetes
API server it cannot reach or list Jobs on, and a store it cannot reach.

Examples:
  whimbrel-launcher                         poll every second
  whimbrel-launcher --once                  one pass, for cron or a scheduled task
  whimbrel-launcher --types ecs --ecs-cluster batch --max-running 50`
