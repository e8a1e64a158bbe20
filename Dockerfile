# Whimbrel's image: the static binaries on a minimal base with CA
# certificates (for HTTPS to AWS). Build: docker build -t whimbrel .
#
# Other images take whimbrel-run from it (see examples/docker/Dockerfile).
# The image's whimbrel-run is built without the embedded store (the
# whimbrel_nosqlite tag) and reads its AWS settings only from what a
# container is given: the environment, web identity, the ECS/EKS container
# credentials endpoint, the instance's role (the whimbrel_leanaws tag; it
# refuses profiles and shared config files, naming them). A wrapper in a
# container keeps its state in DynamoDB, and without the SQLite driver and
# the SDK's SSO and profile machinery it is a quarter smaller and holds less
# memory while its command runs. whimbrel-run-full, beside it, has both
# stores and the SDK's default chain, for a container that mounts an
# embedded store (examples/docker/workflow.yaml) or a profile.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags="-s -w -X github.com/whimbrel/whimbrel/cmd/internal/cli.Version=${VERSION}" \
      -o /out/ ./cmd/... \
 && mv /out/whimbrel-run /out/whimbrel-run-full \
 && CGO_ENABLED=0 go build -trimpath -tags whimbrel_nosqlite,whimbrel_leanaws \
      -ldflags="-s -w -X github.com/whimbrel/whimbrel/cmd/internal/cli.Version=${VERSION}" \
      -o /out/whimbrel-run ./cmd/whimbrel-run

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
# The launcher and the monitor are daemons; pick one with the command:
#   docker run whimbrel whimbrel-launcher --types ecs
#   docker run whimbrel whimbrel-monitor
ENTRYPOINT []
CMD ["whimbrel", "--help"]
