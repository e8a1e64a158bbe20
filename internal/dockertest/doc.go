// Package dockertest holds the docker test group: whimbrel-run as the
// ENTRYPOINT of real containers, side by side with tini, and the launcher's
// Docker backend end to end. Its tests build only with the docker tag and
// need a Docker engine (DOCKER_HOST) that runs containers with
// --network host, plus DynamoDB Local (WHIMBREL_TEST_DYNAMODB):
//
//	scripts/docker-engine run -- scripts/dynamodb-local run -- \
//		go test -tags docker -count=1 ./internal/dockertest/
//
// (make test-docker). The test image is made without a registry: a rootfs
// of a static whimbrel-run, Debian's busybox-static and tini, given to
// docker import. Under CI=true a missing engine fails the group.
package dockertest
