# Whimbrel's image: the four static binaries on a minimal base with CA
# certificates (for HTTPS to AWS). Build: docker build -t whimbrel .
#
# Other images take whimbrel-run from it (see examples/docker/Dockerfile).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags="-s -w -X github.com/whimbrel/whimbrel/internal/cli.Version=${VERSION}" \
      -o /out/ ./cmd/...

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
# The launcher and the monitor are daemons; pick one with the command:
#   docker run whimbrel whimbrel-launcher --types ecs
#   docker run whimbrel whimbrel-monitor
ENTRYPOINT []
CMD ["whimbrel", "--help"]
